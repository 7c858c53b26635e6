//! Operators that outgrow `work_mem` spill to temporary files and give the same rows as in
//! memory; the files are gone afterwards.

mod common;

use common::{open, rows, run};
use quire_engine::Value;
use quire_sql::Session;

/// The engine's temporary files under `dir`.
fn temp_files(dir: &std::path::Path) -> usize {
    let tmp = quire_engine::temp::dir(dir);
    std::fs::read_dir(tmp).map_or(0, Iterator::count)
}

#[test]
fn a_sort_past_work_mem_merges_runs_in_order() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    let mut s = Session::new(std::sync::Arc::clone(&db));
    run(&mut s, "SET work_mem = '64kB'").unwrap();
    let before = db.temp_files_created();
    // 60,000 rows of ~40 bytes: some 40 runs of 64 kB, more than one merge pass's order (6).
    let sorted = rows(
        &mut s,
        "SELECT i, (i * 7919) % 60000 AS k, 'row ' || i AS t FROM generate_series(1, 60000) i \
         ORDER BY k DESC, i",
    );
    assert_eq!(sorted.len(), 60_000);
    let keys: Vec<i64> = sorted
        .iter()
        .map(|r| match r[1] {
            Value::Int(k) => k,
            ref v => panic!("not an integer: {v:?}"),
        })
        .collect();
    assert!(keys.windows(2).all(|w| w[0] >= w[1]), "descending keys");
    assert_eq!(sorted[0][1], Value::Int(59_999));
    assert_eq!(
        sorted[0][2],
        Value::Text(format!(
            "row {}",
            match sorted[0][0] {
                Value::Int(i) => i,
                _ => 0,
            }
        ))
    );
    let made = db.temp_files_created() - before;
    assert!(
        made > 6,
        "runs and a merge pass's output: {made} temp files"
    );
    assert_eq!(temp_files(dir.path()), 0, "the runs are removed");
    Ok(())
}

#[test]
fn a_spilled_sort_is_stable_and_keeps_nulls_last() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut session = Session::new(open(dir.path())?);
    run(&mut session, "SET work_mem = '64kB'").unwrap();
    // Keys with many ties and NULLs: equal keys keep the input order (i ascending).
    let sorted = rows(
        &mut session,
        "SELECT i, nullif(i % 7, 3) AS k FROM generate_series(1, 30000) i ORDER BY k",
    );
    assert_eq!(sorted.len(), 30_000);
    let mut last: Option<(Option<i64>, i64)> = None;
    for r in &sorted {
        let Value::Int(i) = r[0] else { panic!("i") };
        let k = match r[1] {
            Value::Int(k) => Some(k),
            Value::Null => None,
            _ => panic!("k"),
        };
        if let Some((lk, li)) = last {
            match (lk, k) {
                (Some(a), Some(b)) => assert!(a < b || (a == b && li < i), "{lk:?} {li} {k:?} {i}"),
                (Some(_), None) => {}
                (None, Some(_)) => panic!("a NULL sorted before a value"),
                (None, None) => assert!(li < i, "NULLs keep their order"),
            }
        }
        last = Some((k, i));
    }
    assert_eq!(temp_files(dir.path()), 0);
    Ok(())
}
