//! The vendored sled splits a leaf that is being appended to unevenly (most keys stay on the
//! left; `vendor/sled/HERMES.md`). These check that the tree still holds exactly what was
//! written, in order, whatever mix of appends, overwrites and removals split it, and after a
//! reopen.

use std::collections::BTreeMap;

use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    /// The next key of stream `s` (a session's messages, a queue's items).
    Append { stream: u8, len: usize },
    /// A key anywhere.
    Put { key: Vec<u8>, len: usize },
    /// The oldest key of stream `s` (a queue's acknowledged item).
    PopFront { stream: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..6, 1usize..300).prop_map(|(stream, len)| Op::Append { stream, len }),
        2 => (proptest::collection::vec(any::<u8>(), 1..12), 1usize..300)
            .prop_map(|(key, len)| Op::Put { key, len }),
        2 => (0u8..6).prop_map(|stream| Op::PopFront { stream }),
    ]
}

fn stream_key(stream: u8, seq: u64) -> Vec<u8> {
    let mut k = format!("agent\0session-{stream}\0").into_bytes();
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

fn apply(
    tree: &sled::Tree,
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
    next: &mut [u64; 6],
    first: &mut [u64; 6],
    op: &Op,
) {
    match op {
        Op::Append { stream, len } => {
            let s = *stream as usize;
            let key = stream_key(*stream, next[s]);
            next[s] += 1;
            let value = vec![*stream; *len];
            tree.insert(&key, value.clone()).unwrap();
            model.insert(key, value);
        }
        Op::Put { key, len } => {
            let value = vec![key[0]; *len];
            tree.insert(key, value.clone()).unwrap();
            model.insert(key.clone(), value);
        }
        Op::PopFront { stream } => {
            let s = *stream as usize;
            if first[s] < next[s] {
                let key = stream_key(*stream, first[s]);
                first[s] += 1;
                tree.remove(&key).unwrap();
                model.remove(&key);
            }
        }
    }
}

fn assert_holds(tree: &sled::Tree, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let got: Vec<(Vec<u8>, Vec<u8>)> = tree
        .iter()
        .map(|kv| {
            let (k, v) = kv.unwrap();
            (k.to_vec(), v.to_vec())
        })
        .collect();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(got.len(), want.len());
    assert!(
        got == want,
        "the tree's contents differ from what was written"
    );
    let back: Vec<Vec<u8>> = tree.iter().rev().map(|kv| kv.unwrap().0.to_vec()).collect();
    assert!(
        back.iter().rev().eq(model.keys()),
        "reverse iteration differs"
    );
    for (k, v) in model.iter().step_by(7) {
        assert_eq!(tree.get(k).unwrap().as_deref(), Some(v.as_slice()));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn appends_overwrites_and_removals_leave_exactly_what_was_written(ops in proptest::collection::vec(op(), 50..1500)) {
        let dir = tempfile::tempdir().unwrap();
        let mut model = BTreeMap::new();
        let (mut next, mut first) = ([0u64; 6], [0u64; 6]);
        {
            let db = super::open(dir.path()).unwrap();
            let tree = db.open_tree("t").unwrap();
            for op in &ops {
                apply(&tree, &mut model, &mut next, &mut first, op);
            }
            assert_holds(&tree, &model);
            db.flush().unwrap();
        }
        let db = super::open(dir.path()).unwrap();
        assert_holds(&db.open_tree("t").unwrap(), &model);
    }
}

#[test]
fn a_long_run_of_appends_reads_back_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let db = super::open(dir.path()).unwrap();
    let tree = db.open_tree("messages").unwrap();
    let mut model = BTreeMap::new();
    for seq in 0..5_000u64 {
        let key = stream_key(1, seq);
        let value = seq.to_be_bytes().to_vec();
        tree.insert(&key, value.clone()).unwrap();
        model.insert(key, value);
    }
    assert_holds(&tree, &model);
    let prefix = b"agent\0session-1\0".to_vec();
    assert_eq!(tree.scan_prefix(prefix).count(), 5_000);
}
