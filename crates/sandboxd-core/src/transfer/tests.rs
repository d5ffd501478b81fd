use bytes::Bytes;

use super::*;

fn policy() -> TarPolicy {
    TarPolicy {
        owner: (1000, 1000),
        max_bytes: 1 << 20,
        max_entries: 100,
    }
}

/// A tar made by the `tar` crate: a directory, a file with a long name, a symlink.
fn sample() -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut dir = tar::Header::new_gnu();
    dir.set_entry_type(tar::EntryType::Directory);
    dir.set_mode(0o755);
    dir.set_size(0);
    builder.append_data(&mut dir, "d", &[][..]).unwrap();
    let mut file = tar::Header::new_gnu();
    file.set_size(5);
    file.set_mode(0o4755);
    file.set_uid(0);
    let long = format!("d/{}", "n".repeat(150));
    builder
        .append_data(&mut file, &long, &b"hello"[..])
        .unwrap();
    let mut link = tar::Header::new_gnu();
    link.set_entry_type(tar::EntryType::Symlink);
    link.set_size(0);
    builder
        .append_link(&mut link, "d/l", "/etc/passwd")
        .unwrap();
    builder.into_inner().unwrap()
}

/// Runs `tar` through the rewriter in chunks of `step` bytes.
fn rewrite(
    tar: &[u8],
    step: usize,
    policy: TarPolicy,
) -> Result<(Vec<u8>, TarSummary), TransferRefused> {
    let mut rewriter = TarIn::new(policy);
    let mut out = Vec::new();
    for chunk in tar.chunks(step) {
        rewriter.push(Bytes::copy_from_slice(chunk), &mut out)?;
    }
    let summary = rewriter.finish(&mut out)?;
    Ok((out.concat(), summary))
}

#[test]
fn entries_are_re_owned_and_stripped_of_set_id_bits_in_any_chunking() {
    for step in [1, 7, 512, 4096, 1 << 20] {
        let (out, summary) = rewrite(&sample(), step, policy()).unwrap();
        assert_eq!(
            summary,
            TarSummary {
                entries: 3,
                bytes: 5
            }
        );
        let mut archive = tar::Archive::new(&out[..]);
        let entries: Vec<_> = archive
            .entries()
            .unwrap()
            .map(|entry| {
                let mut entry = entry.unwrap();
                let header = entry.header().clone();
                let mut content = Vec::new();
                std::io::Read::read_to_end(&mut entry, &mut content).unwrap();
                (entry.path().unwrap().display().to_string(), header, content)
            })
            .collect();
        assert_eq!(entries.len(), 3, "step {step}");
        for (_, header, _) in &entries {
            assert_eq!(header.uid().unwrap(), 1000);
            assert_eq!(header.gid().unwrap(), 1000);
        }
        assert!(
            entries[1].0.ends_with(&"n".repeat(150)),
            "the long name survives"
        );
        assert_eq!(entries[1].2, b"hello");
        assert_eq!(entries[1].1.mode().unwrap(), 0o755);
    }
}

#[test]
fn the_cap_stops_the_stream_before_the_entry_that_passes_it() {
    let mut builder = tar::Builder::new(Vec::new());
    for name in ["a", "b"] {
        let mut header = tar::Header::new_gnu();
        header.set_size(600);
        header.set_mode(0o644);
        builder
            .append_data(&mut header, name, &[7u8; 600][..])
            .unwrap();
    }
    let tar = builder.into_inner().unwrap();
    let mut rewriter = TarIn::new(TarPolicy {
        max_bytes: 1000,
        ..policy()
    });
    let mut out = Vec::new();
    let refused = rewriter.push(Bytes::from(tar), &mut out).unwrap_err();
    assert_eq!(refused, TransferRefused::OverCap { max: 1000 });
    // The first file whole (header and padded content); nothing of the second.
    assert_eq!(out.concat().len(), BLOCK + 1024);
}

#[test]
fn devices_and_fifos_are_refused() {
    for kind in [
        tar::EntryType::Char,
        tar::EntryType::Block,
        tar::EntryType::Fifo,
    ] {
        let mut builder = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(kind);
        header.set_size(0);
        builder.append_data(&mut header, "dev", &[][..]).unwrap();
        let tar = builder.into_inner().unwrap();
        assert!(matches!(
            rewrite(&tar, 512, policy()),
            Err(TransferRefused::EntryType { .. })
        ));
    }
}

#[test]
fn a_pax_owner_is_dropped_and_a_pax_size_frames_the_content() {
    let records = [
        pax::record("uid", "0"),
        pax::record("SCHILY.xattr.security.capability", "x"),
        pax::record("size", "3"),
    ]
    .concat();
    let mut tar = Vec::new();
    let mut ext = tar::Header::new_ustar();
    ext.set_entry_type(tar::EntryType::XHeader);
    ext.set_path("PaxHeader").unwrap();
    ext.set_size(records.len() as u64);
    ext.set_cksum();
    tar.extend_from_slice(ext.as_bytes());
    tar.extend_from_slice(&records);
    tar.resize(BLOCK + padded(records.len() as u64) as usize, 0);
    let mut file = tar::Header::new_ustar();
    file.set_path("f").unwrap();
    // The header says 0: the PAX size is the real one, as readers take it.
    file.set_size(0);
    file.set_mode(0o644);
    file.set_cksum();
    tar.extend_from_slice(file.as_bytes());
    tar.extend_from_slice(b"abc");
    tar.resize(tar.len() + BLOCK - 3, 0);
    let (out, summary) = rewrite(&tar, 100, policy()).unwrap();
    assert_eq!(summary.bytes, 3);
    let text = String::from_utf8_lossy(&out);
    assert!(!text.contains("uid=0") && !text.contains("xattr"), "{text}");
    assert!(text.contains("size=3"));
}

#[test]
fn a_corrupt_header_or_a_cut_archive_is_refused() {
    let mut tar = sample();
    tar[0] ^= 1;
    assert!(rewrite(&tar, 512, policy()).is_err());
    let tar = sample();
    assert!(rewrite(&tar[..BLOCK + 10], 512, policy()).is_err());
}

#[test]
fn a_raw_entry_is_a_valid_archive_even_with_a_long_name() {
    for name in ["short.txt", &"x".repeat(200)] {
        let mut tar = raw_entry(name, 4, 0o6644, (1000, 1000), 0);
        tar.extend_from_slice(b"data");
        tar.resize(tar.len() + BLOCK - 4 + 2 * BLOCK, 0);
        let mut archive = tar::Archive::new(&tar[..]);
        let mut entry = archive.entries().unwrap().next().unwrap().unwrap();
        assert_eq!(entry.path().unwrap().display().to_string(), name);
        assert_eq!(entry.header().mode().unwrap(), 0o644);
        let mut content = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut content).unwrap();
        assert_eq!(content, b"data");
    }
}

#[test]
fn one_file_is_cut_out_of_a_tar_in_any_chunking() {
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(1000);
    header.set_mode(0o644);
    let content: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
    builder
        .append_data(&mut header, "n".repeat(200), &content[..])
        .unwrap();
    let tar = builder.into_inner().unwrap();
    for step in [1, 100, 512, 1 << 20] {
        let mut reader = FileOut::new(1 << 20);
        let mut out = Vec::new();
        for chunk in tar.chunks(step) {
            reader
                .push(Bytes::copy_from_slice(chunk), &mut out)
                .unwrap();
            if reader.is_done() {
                break;
            }
        }
        assert_eq!(reader.size(), Some(1000));
        assert_eq!(out.concat(), content, "step {step}");
    }
    let mut small = FileOut::new(10);
    assert_eq!(
        small.push(Bytes::from(tar), &mut Vec::new()),
        Err(TransferRefused::OverCap { max: 10 })
    );
}

#[test]
fn implied_directories_are_made_the_users_and_paths_going_up_are_refused() {
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(1);
    header.set_mode(0o644);
    builder
        .append_data(&mut header, "a/b/c.txt", &b"x"[..])
        .unwrap();
    let mut header = tar::Header::new_gnu();
    header.set_size(1);
    header.set_mode(0o644);
    builder
        .append_data(&mut header, "a/d.txt", &b"y"[..])
        .unwrap();
    let tar = builder.into_inner().unwrap();
    let (out, summary) = rewrite(&tar, 512, policy()).unwrap();
    assert_eq!(summary.entries, 2, "made directories are not counted");
    let mut archive = tar::Archive::new(&out[..]);
    let listed: Vec<(String, bool, u64)> = archive
        .entries()
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            let header = entry.header();
            (
                entry.path().unwrap().display().to_string(),
                header.entry_type().is_dir(),
                header.uid().unwrap(),
            )
        })
        .collect();
    let expected = [
        ("a", true),
        ("a/b", true),
        ("a/b/c.txt", false),
        ("a/d.txt", false),
    ];
    assert_eq!(listed.len(), expected.len(), "{listed:?}");
    for ((path, dir, uid), (want, want_dir)) in listed.iter().zip(expected) {
        assert_eq!(
            (path.trim_end_matches('/'), *dir, *uid),
            (want, want_dir, 1000)
        );
    }

    let mut up = tar::Header::new_gnu();
    up.set_size(0);
    up.set_mode(0o644);
    // The tar crate refuses to write `..`: set the name's bytes directly.
    up.as_old_mut().name[..9].copy_from_slice(b"../escape");
    up.set_cksum();
    let mut tar = up.as_bytes().to_vec();
    tar.resize(3 * BLOCK, 0);
    assert!(matches!(
        rewrite(&tar, 512, policy()),
        Err(TransferRefused::Malformed(_))
    ));
}

/// An extended header of `kind` whose content is `data`, padded.
fn extension(kind: tar::EntryType, data: &[u8]) -> Vec<u8> {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(kind);
    header
        .set_path(if kind == tar::EntryType::XHeader {
            "PaxHeader"
        } else {
            "././@LongLink"
        })
        .unwrap();
    header.set_size(data.len() as u64);
    header.set_cksum();
    let mut bytes = header.as_bytes().to_vec();
    bytes.extend_from_slice(data);
    bytes.resize(BLOCK + padded(data.len() as u64) as usize, 0);
    bytes
}

#[test]
fn an_entry_with_two_names_is_refused_in_either_order() {
    let pax_name = extension(
        tar::EntryType::XHeader,
        &pax::record("path", "inside/ok.txt"),
    );
    let gnu_name = extension(tar::EntryType::GNULongName, b"../../etc/cron.d/x\0");
    let pax_link = extension(tar::EntryType::XHeader, &pax::record("linkpath", "a"));
    let gnu_link = extension(tar::EntryType::GNULongLink, b"b\0");
    let mut file = tar::Header::new_gnu();
    file.set_path("short").unwrap();
    file.set_size(0);
    file.set_mode(0o644);
    file.set_cksum();
    for (first, second, said) in [
        (&pax_name, &gnu_name, "two names"),
        (&gnu_name, &pax_name, "two names"),
        (&pax_link, &gnu_link, "two link names"),
        (&gnu_link, &pax_link, "two link names"),
    ] {
        let mut tar = [first.as_slice(), second.as_slice(), file.as_bytes()].concat();
        tar.resize(tar.len() + 2 * BLOCK, 0);
        let refused = rewrite(&tar, 512, policy()).unwrap_err();
        assert!(refused.to_string().contains(said), "{refused}");
    }
    // One name, of either kind, still passes.
    for only in [&pax_name, &gnu_link] {
        let mut tar = [only.as_slice(), file.as_bytes()].concat();
        tar.resize(tar.len() + 2 * BLOCK, 0);
        rewrite(&tar, 512, policy()).unwrap();
    }
}
