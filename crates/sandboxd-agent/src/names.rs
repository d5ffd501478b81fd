//! Names of users and groups by id, from the sandbox's `/etc/passwd` and `/etc/group`
//! as they are when asked (read once per request, at most 1 MiB each).

use std::collections::HashMap;
use std::io::Read as _;

/// Bytes of each file read at most.
const MAX_FILE: u64 = 1024 * 1024;

/// Ids to names.
#[derive(Debug, Default)]
pub struct Names {
    users: HashMap<u32, String>,
    groups: HashMap<u32, String>,
}

fn table(path: &str) -> HashMap<u32, String> {
    let mut text = String::new();
    let read =
        std::fs::File::open(path).and_then(|file| file.take(MAX_FILE).read_to_string(&mut text));
    if read.is_err() {
        return HashMap::new();
    }
    parse(&text)
}

/// `name:x:id:…` lines to id → name; the first name of an id wins.
fn parse(text: &str) -> HashMap<u32, String> {
    let mut names = HashMap::new();
    for line in text.lines() {
        let mut fields = line.split(':');
        let (Some(name), Some(_), Some(id)) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        if let Ok(id) = id.parse::<u32>() {
            names.entry(id).or_insert_with(|| name.to_owned());
        }
    }
    names
}

impl Names {
    pub fn load() -> Self {
        Self {
            users: table("/etc/passwd"),
            groups: table("/etc/group"),
        }
    }

    pub fn user(&self, uid: u32) -> Option<String> {
        self.users.get(&uid).cloned()
    }

    pub fn group(&self, gid: u32) -> Option<String> {
        self.groups.get(&gid).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_map_to_the_first_name() {
        let names = parse(
            "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/bash\nbad\nalias:x:0:0::/:/bin/sh\n",
        );
        assert_eq!(names.get(&0).map(String::as_str), Some("root"));
        assert_eq!(names.get(&1000).map(String::as_str), Some("user"));
        assert_eq!(names.len(), 2);
    }
}
