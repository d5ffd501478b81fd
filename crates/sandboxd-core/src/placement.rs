//! Placement: which engine a new sandbox runs on when the caller names none. Each
//! candidate (the local engine, and every reachable server the caller may use) has a
//! capacity and what its sandboxes reserve; the sandbox goes where the most room is
//! left after it, and nowhere when it fits nowhere.
//!
//! `choose(candidates, want)`: the scarcer of CPU and memory decides; when nothing fits,
//! the `Shortfall` is named.

use crate::api::Resources;

/// An engine a sandbox could run on.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// `None`: the local engine.
    pub server_id: Option<String>,
    pub name: String,
    pub capacity: Resources,
    pub reserved: Resources,
}

impl Candidate {
    fn free(&self) -> Resources {
        Resources {
            cpu: self.capacity.cpu - self.reserved.cpu,
            memory_mb: self.capacity.memory_mb - self.reserved.memory_mb,
        }
    }

    fn fits(&self, want: Resources) -> bool {
        let free = self.free();
        free.cpu + 1e-9 >= want.cpu && free.memory_mb >= want.memory_mb
    }

    /// The share of capacity left after placing `want`: the smaller of CPU and memory.
    fn room_after(&self, want: Resources) -> f64 {
        let free = self.free();
        let share = |left: f64, capacity: f64| {
            if capacity > 0.0 { left / capacity } else { 0.0 }
        };
        share(free.cpu - want.cpu, self.capacity.cpu).min(share(
            (free.memory_mb - want.memory_mb) as f64,
            self.capacity.memory_mb as f64,
        ))
    }
}

/// Why a sandbox fits nowhere.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", describe(.want, .best.as_ref()))]
pub struct Shortfall {
    pub want: Resources,
    /// The candidate with the most room, and what it has free.
    pub best: Option<(String, Resources)>,
}

fn describe(want: &Resources, best: Option<&(String, Resources)>) -> String {
    let asked = format!("{} CPUs and {} MiB", want.cpu, want.memory_mb);
    match best {
        None => format!("no server is reachable to place a sandbox of {asked}"),
        Some((name, free)) => format!(
            "no server has room for a sandbox of {asked}: the most room is on {name}, \
             with {:.2} CPUs and {} MiB free",
            free.cpu.max(0.0),
            free.memory_mb.max(0)
        ),
    }
}

/// The candidate a sandbox wanting `want` goes to: the one with the most room left after
/// it (ties: the first, so the order of candidates is the preference).
pub fn choose(candidates: &[Candidate], want: Resources) -> Result<&Candidate, Shortfall> {
    candidates
        .iter()
        .filter(|c| c.fits(want))
        .fold(None, |best: Option<&Candidate>, c| match best {
            Some(b) if b.room_after(want) >= c.room_after(want) => Some(b),
            _ => Some(c),
        })
        .ok_or_else(|| Shortfall {
            want,
            best: candidates
                .iter()
                .max_by(|a, b| a.room_after(want).total_cmp(&b.room_after(want)))
                .map(|c| (c.name.clone(), c.free())),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(id: &str, cpu: f64, memory_mb: i64, used_cpu: f64, used_mb: i64) -> Candidate {
        Candidate {
            server_id: (id != "local").then(|| id.to_owned()),
            name: id.to_owned(),
            capacity: Resources { cpu, memory_mb },
            reserved: Resources {
                cpu: used_cpu,
                memory_mb: used_mb,
            },
        }
    }

    const SMALL: Resources = Resources {
        cpu: 1.0,
        memory_mb: 512,
    };

    #[test]
    fn the_most_room_left_wins() {
        let candidates = [
            candidate("local", 2.0, 4096, 1.0, 512),
            candidate("a", 8.0, 16384, 2.0, 2048),
            candidate("b", 8.0, 16384, 6.0, 1024),
        ];
        assert_eq!(choose(&candidates, SMALL).unwrap().name, "a");
    }

    #[test]
    fn the_scarcer_resource_decides() {
        // Plenty of CPU on `a`, but its memory is nearly gone.
        let candidates = [
            candidate("a", 64.0, 8192, 0.0, 7000),
            candidate("b", 4.0, 8192, 1.0, 1024),
        ];
        assert_eq!(choose(&candidates, SMALL).unwrap().name, "b");
    }

    #[test]
    fn a_full_candidate_is_skipped_and_ties_keep_the_order() {
        let candidates = [
            candidate("local", 2.0, 4096, 2.0, 0),
            candidate("a", 4.0, 4096, 0.0, 0),
            candidate("b", 4.0, 4096, 0.0, 0),
        ];
        assert_eq!(choose(&candidates, SMALL).unwrap().name, "a");
    }

    #[test]
    fn nothing_fits_names_the_shortfall() {
        let candidates = [
            candidate("local", 2.0, 4096, 1.5, 0),
            candidate("a", 4.0, 2048, 0.0, 1800),
        ];
        let want = Resources {
            cpu: 2.0,
            memory_mb: 1024,
        };
        let shortfall = choose(&candidates, want).unwrap_err();
        let text = shortfall.to_string();
        assert!(text.contains("2 CPUs and 1024 MiB"), "{text}");
        assert!(text.contains("free"), "{text}");
        assert!(
            choose(&[], want)
                .unwrap_err()
                .to_string()
                .contains("no server is reachable")
        );
    }

    #[test]
    fn exactly_full_fits() {
        let candidates = [candidate("a", 2.0, 1024, 1.0, 512)];
        assert_eq!(choose(&candidates, SMALL).unwrap().name, "a");
    }
}
