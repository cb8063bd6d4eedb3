//! Unit tests of the harness's pure pieces: partitions, snapshot files, the recorded block, escaping.

use super::report::{github_error, xml_escape};
use super::*;

#[test]
fn partitions_hold_every_scenario_exactly_once() {
    let ids: Vec<String> = (0..200)
        .map(|index| format!("spec/scenario_{index}"))
        .collect();
    for count in 1..=5 {
        for id in &ids {
            for mode in [PartitionMode::Count, PartitionMode::Hash] {
                let position = ids.iter().position(|other| other == id).unwrap_or(0);
                let shards = (1..=count)
                    .filter(|index| {
                        Partition {
                            mode,
                            index: *index,
                            count,
                        }
                        .keeps(position, id)
                    })
                    .count();
                assert_eq!(shards, 1, "{id} in {count} shards ({mode:?})");
            }
        }
    }
    // Round-robin: 7 scenarios over 3 shards are 3, 2 and 2, never an empty shard.
    let sizes: Vec<usize> = (1..=3)
        .map(|index| {
            (0..7)
                .filter(|position| {
                    Partition {
                        mode: PartitionMode::Count,
                        index,
                        count: 3,
                    }
                    .keeps(*position, "x")
                })
                .count()
        })
        .collect();
    assert_eq!(sizes, vec![3, 2, 2]);
    let count = |index, count| Partition {
        mode: PartitionMode::Count,
        index,
        count,
    };
    assert_eq!("2/3".parse(), Ok(count(2, 3)));
    assert_eq!("count:2/3".parse(), Ok(count(2, 3)));
    assert_eq!(
        "hash:1/4".parse(),
        Ok(Partition {
            mode: PartitionMode::Hash,
            index: 1,
            count: 4
        })
    );
    assert_eq!(count(2, 3).to_string(), "count:2/3");
    for bad in [
        "0/3", "4/3", "3", "a/b", "1/0", "rr:1/2", "hash:", "hash:0/2",
    ] {
        assert!(bad.parse::<Partition>().is_err(), "{bad}");
    }
}

#[test]
fn snapshot_files_round_trip_their_contents() {
    let file = snapshot::render(
        "golden/a/b/scenario.yaml",
        Some("it: works"),
        "{\"seq\":0}\n{\"seq\":1}\n",
    );
    assert!(file.starts_with("---\nsource: golden/a/b/scenario.yaml\ndescription: \"it: works\"\nexpression: trace\n---\n"));
    assert_eq!(snapshot::contents(&file), "{\"seq\":0}\n{\"seq\":1}");
    assert_eq!(snapshot::header_lines(&file), 5);
    assert_eq!(
        snapshot::contents(&file.replace('\n', "\r\n")),
        "{\"seq\":0}\n{\"seq\":1}"
    );
}

/// `cargo insta accept` re-saves a pending snapshot through insta's own writer; a header
/// written here must come back byte for byte, or every accept would churn the file.
#[test]
fn insta_reads_and_rewrites_snapshot_files_unchanged() {
    let directory = std::env::temp_dir().join(format!("charter-insta-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&directory);
    let descriptions = [
        "plain words only",
        "T-002 times out once (20m recorded), the retry succeeds",
        "it: works",
        "- starts with a dash",
        "true",
        "12.5",
        ".hidden",
        "quotes \"inside\" and a back\\slash",
        "tab\there, bell\u{7} and del\u{7f}",
        "non-ASCII: délai dépassé, 超时",
        " edge spaces ",
        "",
    ];
    for (index, description) in descriptions.iter().enumerate() {
        let ours = snapshot::render(
            "golden/a/b/scenario.yaml",
            Some(description),
            "{\"seq\":0}\n{\"seq\":1}\n",
        );
        let path = directory.join(format!("{index}.snap"));
        let again = directory.join(format!("{index}.again.snap"));
        assert!(std::fs::write(&path, &ours).is_ok());
        let read = insta::Snapshot::from_file(&path);
        let Ok(read) = read else {
            panic!("insta cannot read {ours:?}: {read:?}");
        };
        if !description.is_empty() {
            assert_eq!(read.metadata().description(), Some(*description));
        }
        assert_eq!(read.metadata().source(), Some("golden/a/b/scenario.yaml"));
        assert_eq!(
            read.as_text().map(ToString::to_string).as_deref(),
            Some("{\"seq\":0}\n{\"seq\":1}")
        );
        assert!(read.save(&again).is_ok());
        assert_eq!(
            std::fs::read_to_string(&again).unwrap_or_default(),
            ours,
            "insta rewrites the header for {description:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn the_recorded_block_is_replaced_and_nothing_else() {
    let cassette = "version: 1\n# hand-written\nrecorded: { spec_hash: \"sha256:old\" }\ncalls:\n  - { step: plan, response: { goal: x } }\n";
    let mut recorded = Recorded {
        spec_hash: "sha256:new".to_string(),
        ..Recorded::default()
    };
    recorded.prompts.insert("planner".into(), "sha256:p".into());
    recorded.rendered.insert(
        "planner".into(),
        "  Plan this:\n{\"goal\": \"x\"}\n\ntrailing  \n".into(),
    );
    let block = recorded_block(&recorded, true).unwrap_or_default();
    let replaced = replace_recorded_block(cassette, &block).unwrap_or_default();
    assert!(
        replaced.starts_with("version: 1\n# hand-written\nrecorded:"),
        "{replaced}"
    );
    assert!(
        replaced.ends_with("calls:\n  - { step: plan, response: { goal: x } }\n"),
        "{replaced}"
    );
    let read = Cassette::from_yaml("c.yaml", &replaced).map(|cassette| cassette.recorded);
    assert_eq!(read, Ok(Some(recorded)), "{replaced}");
}

#[test]
fn annotations_and_xml_are_escaped() {
    assert_eq!(
        xml_escape("a<b & \"c\"\u{1}"),
        "a&lt;b &amp; &quot;c&quot;?"
    );
    assert_eq!(
        github_error(
            "golden/a,b/c.yaml",
            Some(3),
            "FAIL a/b",
            "50% done\nnext: x"
        ),
        "::error file=golden/a%2Cb/c.yaml,line=3,title=FAIL a/b::50%25 done%0Anext: x"
    );
}

#[test]
fn traces_lose_the_project_root_and_the_temporary_directory() {
    let root = std::env::temp_dir().join("charter-harness-normalize");
    let trace = format!("{{\"path\":\"{}/out/delivery.json\"}}", root.display());
    assert_eq!(
        normalize_trace(trace, &root),
        "{\"path\":\"<root>/out/delivery.json\"}"
    );
}

#[test]
fn every_path_in_a_trace_is_replaced_in_one_pass_and_other_text_is_kept() {
    let temp = std::env::temp_dir();
    let root = tempfile::tempdir_in(&temp).expect("a temporary root");
    let root = root.path();
    let trace = format!(
        "{{\"a\":\"{root}/x\",\"b\":\"{temp}/y\",\"c\":\"1/2 ✓ {root}\",\"d\":\"/elsewhere\"}}\n{{\"e\":\"{root}/z\"}}\n",
        root = root.display(),
        temp = temp.display()
    );
    let expected = "{\"a\":\"<root>/x\",\"b\":\"<tmp>/y\",\"c\":\"1/2 ✓ <root>\",\"d\":\"/elsewhere\"}\n{\"e\":\"<root>/z\"}\n";
    assert_eq!(normalize_trace(trace.clone(), root), expected);
    // The second time comes from the per-root cache and gives the same text.
    assert_eq!(normalize_trace(trace.clone(), root), expected);
    // A trace with nothing to replace comes back as it was.
    let plain = "{\"d\":\"/elsewhere/x\",\"e\":\"1/2\"}\n".to_string();
    assert_eq!(normalize_trace(plain.clone(), root), plain);
}
