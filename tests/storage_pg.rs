//! The PostgreSQL storage adapter against a real PostgreSQL (Debian's package, started by the
//! test in a temporary directory): batches, tenants, scans, and an outage.

mod common;

use common::Postgres;
use terrace_engine::storage::{postgres, StorageError};

#[test]
fn batches_tenants_and_scans() {
    let pg = Postgres::start();
    let s = postgres::connect(&pg.url()).unwrap();
    assert_eq!(s.name(), "postgres");
    let ops = (0..500u32).map(|i| (format!("k{i:04}").into_bytes(), Some(i.to_le_bytes().to_vec()))).collect();
    s.block_on(s.write("shop".into(), ops)).unwrap();
    // One batch with repeated keys: the last write wins; deletes and puts together.
    let ops = vec![
        (b"k0001".to_vec(), Some(b"first".to_vec())),
        (b"k0001".to_vec(), Some(b"second".to_vec())),
        (b"k0002".to_vec(), None),
        (b"k0003".to_vec(), None),
        (b"k0003".to_vec(), Some(b"back".to_vec())),
        (vec![0u8, 255, 0], Some(vec![0u8; 3])),
    ];
    s.block_on(s.write("shop".into(), ops)).unwrap();
    s.block_on(s.write("blog".into(), vec![(b"k0001".to_vec(), Some(b"blog's".to_vec()))])).unwrap();
    let got = s.block_on(s.get("shop".into(), vec![b"k0001".to_vec(), b"k0002".to_vec(), b"k0003".to_vec(), vec![0, 255, 0], b"zzz".to_vec()])).unwrap();
    assert_eq!(got, vec![Some(b"second".to_vec()), None, Some(b"back".to_vec()), Some(vec![0; 3]), None]);
    assert_eq!(s.block_on(s.get("blog".into(), vec![b"k0001".to_vec()])).unwrap(), vec![Some(b"blog's".to_vec())]);
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = s.block_on(s.scan("shop".into(), after.clone(), 128)).unwrap();
        if page.is_empty() {
            break;
        }
        after = Some(page.last().unwrap().0.clone());
        seen.extend(page.into_iter().map(|(k, _)| k));
    }
    assert_eq!(seen.len(), 500, "499 of the first batch and the binary key");
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "key order");

    // A database of its own (what the storage benchmark gives each engine), twice: no error.
    let other_url = postgres::create_database(&pg.url(), "terrace_other").unwrap();
    assert_eq!(postgres::create_database(&pg.url(), "terrace_other").unwrap(), other_url);
    assert!(other_url.ends_with("/terrace_other"), "{other_url}");
    let other = postgres::connect(&other_url).unwrap();
    assert_eq!(other.block_on(other.get("shop".into(), vec![b"k0001".to_vec()])).unwrap(), vec![None], "nothing shared");
    assert!(postgres::create_database(&pg.url(), "x; DROP TABLE terrace_kv").is_err());
}

#[test]
fn an_outage_is_an_error_and_the_adapter_recovers() {
    let pg = Postgres::start();
    let s = postgres::connect(&pg.url()).unwrap();
    s.block_on(s.write("t".into(), vec![(b"a".to_vec(), Some(b"1".to_vec()))])).unwrap();
    pg.stop();
    let r = s.block_on(s.write("t".into(), vec![(b"b".to_vec(), Some(b"2".to_vec()))]));
    assert!(matches!(r, Err(StorageError::Unavailable(_)) | Err(StorageError::Backend(_))), "{r:?}");
    assert!(s.block_on(s.get("t".into(), vec![b"a".to_vec()])).is_err());
    pg.resume();
    let mut ok = false;
    for _ in 0..50 {
        if s.block_on(s.write("t".into(), vec![(b"b".to_vec(), Some(b"2".to_vec()))])).is_ok() {
            ok = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(ok, "writes work again once PostgreSQL is back");
    let got = s.block_on(s.get("t".into(), vec![b"a".to_vec(), b"b".to_vec()])).unwrap();
    assert_eq!(got, vec![Some(b"1".to_vec()), Some(b"2".to_vec())]);
    // Connecting to nothing is a clear error.
    let e = postgres::connect("postgres://postgres@127.0.0.1:1/postgres").err().unwrap().to_string();
    assert!(e.contains("postgres"), "{e}");
}
