//! The etcd client and the election against a real etcd (Debian's `etcd-server`, started
//! here in a temporary directory on free ports; tests/run.sh installs it).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use terrace_etcd::testing::Member;
use terrace_etcd::{Client, Compare, Election, Event, Op, Watch};

/// A member of its own, and a client of it.
struct Etcd(Member);

impl Etcd {
    fn start() -> Etcd {
        Etcd(Member::start())
    }

    fn client(&self) -> Arc<Client> {
        Arc::new(Client::new(&[self.0.endpoint()], Duration::from_secs(2)).unwrap())
    }
}

#[tokio::test]
async fn transactions_check_revisions_and_prefixes_list_in_order() {
    let etcd = Etcd::start();
    let c = etcd.client();
    let put_at = c.put(b"/t/map", b"v1", 0).await.unwrap();
    let (kv, _) = c.get(b"/t/map").await.unwrap();
    let kv = kv.unwrap();
    assert_eq!((kv.value.as_slice(), kv.mod_revision, kv.create_revision), (b"v1".as_slice(), put_at, put_at));
    // A write that read revision `put_at` wins once; the same stale write then fails and
    // reads what is there instead.
    let write = |value: &'static [u8], seen: i64| {
        let c = c.clone();
        async move {
            c.txn(
                &[Compare::ModRevision(b"/t/map".to_vec(), seen)],
                &[Op::Put { key: b"/t/map".to_vec(), value: value.to_vec(), lease: 0 }],
                &[Op::Get { key: b"/t/map".to_vec() }],
            )
            .await
            .unwrap()
        }
    };
    let won = write(b"v2", put_at).await;
    assert!(won.succeeded && won.revision > put_at);
    let lost = write(b"v3", put_at).await;
    assert!(!lost.succeeded);
    assert_eq!(lost.gets[0][0].value, b"v2");
    // Create-only: a key that exists is not made again.
    let created =
        c.txn(&[Compare::CreateRevision(b"/t/map".to_vec(), 0)], &[Op::Put { key: b"/t/map".to_vec(), value: b"x".to_vec(), lease: 0 }], &[]).await.unwrap();
    assert!(!created.succeeded);
    for k in ["/t/b", "/t/a", "/u/z"] {
        c.put(k.as_bytes(), b"1", 0).await.unwrap();
    }
    let (listed, _) = c.get_prefix(b"/t/").await.unwrap();
    let keys: Vec<&[u8]> = listed.iter().map(|kv| kv.key.as_slice()).collect();
    assert_eq!(keys, [b"/t/a".as_slice(), b"/t/b", b"/t/map"]);
    assert_eq!(c.delete(b"/t/a").await.unwrap(), 1);
    assert_eq!(c.get(b"/t/a").await.unwrap().0, None);
}

#[tokio::test]
async fn a_lease_keeps_its_keys_until_it_ends() {
    let etcd = Etcd::start();
    let c = etcd.client();
    let lease = c.lease_grant(Duration::from_secs(5)).await.unwrap();
    c.put(b"/t/leased", b"1", lease).await.unwrap();
    assert!(c.lease_keepalive(lease).await.unwrap().is_some_and(|ttl| ttl > 0));
    assert_eq!(c.get(b"/t/leased").await.unwrap().0.map(|kv| kv.lease), Some(lease));
    c.lease_revoke(lease).await.unwrap();
    assert_eq!(c.get(b"/t/leased").await.unwrap().0, None, "its keys went with it");
    assert_eq!(c.lease_keepalive(lease).await.unwrap(), None, "an ended lease is not renewed");
}

#[tokio::test]
async fn a_watch_sees_every_change_from_a_revision_on() {
    let etcd = Etcd::start();
    let c = etcd.client();
    let first = c.put(b"/w/a", b"1", 0).await.unwrap();
    c.put(b"/w/b", b"2", 0).await.unwrap();
    c.put(b"/elsewhere", b"x", 0).await.unwrap();
    // From a revision in the past: what happened since, then what happens next.
    let mut watch = Watch::open(&c, b"/w/", true, first).await.unwrap();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        seen.extend(watch.next().await.unwrap());
    }
    c.delete(b"/w/a").await.unwrap();
    while seen.len() < 3 {
        seen.extend(watch.next().await.unwrap());
    }
    let described: Vec<String> = seen
        .iter()
        .map(|e| match e {
            Event::Put(kv) => format!("put {}={}", String::from_utf8_lossy(&kv.key), String::from_utf8_lossy(&kv.value)),
            Event::Delete(k, _) => format!("delete {}", String::from_utf8_lossy(k)),
        })
        .collect();
    assert_eq!(described, ["put /w/a=1", "put /w/b=2", "delete /w/a"]);
}

/// A TCP forwarder to etcd that a test can cut (every connection closed, new ones refused
/// at once) and mend: one candidate's link to etcd.
struct Link {
    port: u16,
    cut: Arc<AtomicBool>,
}

impl Link {
    async fn to(upstream: u16) -> Link {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let flag = cut.clone();
        tokio::spawn(async move {
            while let Ok((mut down, _)) = listener.accept().await {
                if flag.load(Ordering::SeqCst) {
                    continue; // (dropped: closed at once)
                }
                let flag = flag.clone();
                tokio::spawn(async move {
                    let Ok(mut up) = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await else { return };
                    let copy = tokio::io::copy_bidirectional(&mut down, &mut up);
                    let watch_cut = async {
                        while !flag.load(Ordering::SeqCst) {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                    };
                    tokio::select! { _ = copy => {}, _ = watch_cut => {} }
                });
            }
        });
        Link { port, cut }
    }

    fn client(&self) -> Arc<Client> {
        Arc::new(Client::new(&[format!("127.0.0.1:{}", self.port)], Duration::from_millis(500)).unwrap())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_at_a_time_and_a_takeover_when_it_is_cut_off() {
    let etcd = Etcd::start();
    let (link_a, link_b) = (Link::to(etcd.0.port).await, Link::to(etcd.0.port).await);
    let ttl = Duration::from_secs(2);
    let a = Election::start(link_a.client(), "/terrace/leader", "console-a:8080", ttl);
    let b = Election::start(link_b.client(), "/terrace/leader", "console-b:8080", ttl);
    let deadline = Instant::now() + Duration::from_secs(10);
    while a.leading().is_none() && b.leading().is_none() {
        assert!(Instant::now() < deadline, "nobody leads");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (leader, follower, leader_link, name) = if a.leading().is_some() { (a, b, link_a, "console-a:8080") } else { (b, a, link_b, "console-b:8080") };
    let term = leader.leading().unwrap().term;
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(follower.leader().as_deref(), Some(name), "the follower knows who leads");
    assert!(follower.leading().is_none());
    // The leader's fenced write goes through; one made with another term does not.
    let c = etcd.client();
    let write = |fence: Compare| {
        let c = c.clone();
        async move { c.txn(&[fence], &[Op::Put { key: b"/terrace/topology".to_vec(), value: b"x".to_vec(), lease: 0 }], &[]).await.unwrap().succeeded }
    };
    assert!(write(leader.fence().unwrap()).await);
    assert!(!write(Compare::CreateRevision(b"/terrace/leader".to_vec(), term - 1)).await);
    // Cut off from etcd: it stops leading before the other starts, and the other takes
    // over within the lease's length and a poll or two.
    leader_link.cut.store(true, Ordering::SeqCst);
    let cut_at = Instant::now();
    let (mut old_stopped, mut new_started) = (None, None);
    while new_started.is_none() {
        let now = Instant::now();
        let (old, new) = (leader.leading().is_some(), follower.leading().is_some());
        assert!(!(old && new), "two leaders at once");
        if !old && old_stopped.is_none() {
            old_stopped = Some(now);
        }
        if new {
            new_started = Some(now);
        }
        assert!(now < cut_at + Duration::from_secs(10), "no takeover");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = new_started.unwrap().duration_since(cut_at);
    assert!(took < ttl + Duration::from_secs(2), "took over in {took:?}");
    let new_term = follower.leading().unwrap().term;
    assert!(new_term > term, "a new term");
    assert!(!write(Compare::CreateRevision(b"/terrace/leader".to_vec(), term)).await, "the deposed term cannot write");
    assert!(write(follower.fence().unwrap()).await);
    // Mended, the old leader follows.
    leader_link.cut.store(false, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(10);
    while leader.leader().as_deref() == Some(name) {
        assert!(Instant::now() < deadline, "the old leader never saw the new one");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(leader.leading().is_none());
    // Resigning hands over at once.
    follower.resign().await;
    let deadline = Instant::now() + Duration::from_secs(3);
    while leader.leading().is_none() {
        assert!(Instant::now() < deadline, "no takeover after a resignation");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
