//! Tenants sharing engines through the proxy: a hostile tenant (or an unauthenticated client
//! of the default tenant) can neither reach another tenant's keys nor change what the engines
//! share — their settings, users, namespaces — nor see other tenants' clients. The issue's
//! reproducers one by one, then every command of COMMAND with generated arguments sent as each
//! tenant and as an unauthenticated client, checking the others' keys and the engines' state.

mod common;

use std::time::Duration;

use common::requests::{changes_connection_mode, describe_all, generate, skipped, Client, NoReply, HAND_WRITTEN};
use common::{encode, err, eventually, q, temp_dir, Engine, Proxy, Raw, RedisPort};

/// Two engines behind a proxy with tenants alice and bob, an admin user, and a default
/// tenant without a password (what an unauthenticated client gets).
fn appliance() -> (Vec<Engine>, Proxy) {
    let engines = vec![Engine::start(&[]), Engine::start(&[])];
    let cfg = temp_dir("tenant-isolation").join("terrace.toml");
    std::fs::write(
        &cfg,
        "[proxy]\nadmin_password = \"adminpw\"\n\
         [[proxy.tenants]]\nname = \"alice\"\npassword = \"alicepw\"\n\
         [[proxy.tenants]]\nname = \"bob\"\npassword = \"bobpw\"\n",
    )
    .unwrap();
    let proxy = Proxy::start(&[&engines[0], &engines[1]], &["--config", cfg.to_str().unwrap()], &[]);
    // Every tenant's namespace exists on both engines from here on (the proxy makes one on
    // an engine the first time a tenant reaches it), so the engines' state compares.
    for (user, password) in [("alice", "alicepw"), ("bob", "bobpw")] {
        q::<i64>(&mut connect(&proxy, user, password), &["DBSIZE"]);
    }
    (engines, proxy)
}

fn connect(proxy: &Proxy, user: &str, password: &str) -> redis::Connection {
    let url = format!("redis://{user}:{password}@127.0.0.1:{}/", proxy.port);
    let c = redis::Client::open(url).unwrap().get_connection().unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c
}

/// Bob's keys of every type, and how to read them back.
const BOB_KEYS: usize = 40;

fn write_victim_data(bob: &mut redis::Connection) {
    for i in 0..BOB_KEYS {
        q::<()>(bob, &["SET", &format!("bob:card:{i}"), &format!("4111-{i:04}")]);
    }
    q::<()>(bob, &["HSET", "bob:profile", "name", "Bob", "card", "4111"]);
    q::<()>(bob, &["RPUSH", "bob:orders", "1", "2", "3"]);
    q::<()>(bob, &["ZADD", "bob:scores", "1", "a", "2", "b"]);
    // Scripts and FUNCTION libraries are a tenant's too.
    q::<String>(bob, &["FUNCTION", "LOAD", "REPLACE", VICTIM_LIBRARY]);
    q::<String>(bob, &["SCRIPT", "LOAD", VICTIM_SCRIPT]);
}

const VICTIM_LIBRARY: &str = "#!lua name=victimlib\nredis.register_function('victim_fn', function() return 'victim' end)";
const VICTIM_SCRIPT: &str = "return 'cached victim'";

/// VICTIM_SCRIPT's SHA1, the name EVALSHA knows it by.
const VICTIM_SHA: &str = "7899b0e7b43e9920cfd9774491ae5baa9d3df7b4";

/// What bob reads of his own keys (through the proxy, as bob).
fn victim_view(bob: &mut redis::Connection) -> Vec<String> {
    let mut view: Vec<String> = (0..BOB_KEYS).map(|i| q::<Option<String>>(bob, &["GET", &format!("bob:card:{i}")]).unwrap_or_default()).collect();
    view.push(format!("{:?}", q::<Vec<String>>(bob, &["HGETALL", "bob:profile"])));
    view.push(format!("{:?}", q::<Vec<String>>(bob, &["LRANGE", "bob:orders", "0", "-1"])));
    view.push(format!("{:?}", q::<Vec<String>>(bob, &["ZRANGE", "bob:scores", "0", "-1", "WITHSCORES"])));
    view.push(q::<i64>(bob, &["DBSIZE"]).to_string());
    view.push(q::<String>(bob, &["FCALL", "victim_fn", "0"]));
    view.push(q::<String>(bob, &["EVALSHA", VICTIM_SHA, "0"]));
    view
}

/// What the engines share, read on each engine directly: settings, users, and bob's and
/// alice's compression settings.
fn engines_state(engines: &[Engine]) -> Vec<String> {
    let mut state = Vec::new();
    for e in engines {
        let mut c = e.client();
        let mut config: Vec<String> = q(&mut c, &["CONFIG", "GET", "*"]);
        // (Pairs, in whatever order the engine lists them.)
        let mut pairs: Vec<String> = config.chunks_mut(2).map(|p| p.join("=")).collect();
        pairs.sort();
        state.push(pairs.join("\n"));
        state.push(q::<Vec<String>>(&mut c, &["ACL", "LIST"]).join("\n"));
        for tenant in ["alice", "bob"] {
            match redis::cmd("TERRACE.COMPRESSION").arg("CONFIG").arg(tenant).query::<String>(&mut c) {
                Ok(settings) => state.push(settings),
                Err(e) => state.push(format!("{tenant}: {e}")),
            }
        }
    }
    state
}

#[test]
fn a_hostile_tenant_cannot_switch_namespace_change_the_engines_or_list_others() {
    let (engines, proxy) = appliance();
    let mut bob = connect(&proxy, "bob", "bobpw");
    let _: () = redis::cmd("CLIENT").arg("SETNAME").arg("bobs-app").query(&mut bob).unwrap();
    write_victim_data(&mut bob);
    let before = (victim_view(&mut bob), engines_state(&engines));
    let mut alice = connect(&proxy, "alice", "alicepw");
    let mut anonymous = proxy.client();
    anonymous.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // Switching namespace through the proxy: refused, for a tenant and for the default one.
    for c in [&mut alice, &mut anonymous] {
        let e = err(c, &["TERRACE.NAMESPACE", "bob"]);
        assert!(e.to_ascii_uppercase().contains("NOPERM") && e.contains("AUTH <tenant> <password>"), "{e}");
        let keys: Vec<String> = q(c, &["KEYS", "*"]);
        assert!(keys.iter().all(|k| !k.starts_with("bob:")), "bob's keys listed: {keys:?}");
        assert_eq!(q::<Option<String>>(c, &["GET", "bob:card:1"]), None);
    }
    // An engine refuses a namespace name that is not one (`..` once named a folder outside
    // the data directory's compression folder).
    for name in [".", "..", "a/b"] {
        let e = err(&mut engines[0].client(), &["TERRACE.NAMESPACE", name]);
        assert!(e.contains("namespace names are 1-64 characters"), "{name}: {e}");
    }
    // A new connection of alice's is still in her keyspace.
    assert_eq!(q::<Option<String>>(&mut connect(&proxy, "alice", "alicepw"), &["GET", "bob:card:1"]), None);
    // Engine-wide settings, users and operator commands: refused.
    for argv in [
        &["CONFIG", "SET", "maxmemory", "1"][..],
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-random"],
        &["CONFIG", "GET", "requirepass"],
        &["ACL", "SETUSER", "default", "-get"],
        &["ACL", "LIST"],
        &["SLOWLOG", "GET"],
        &["BGSAVE"],
        &["TERRACE.STATS"],
        &["TERRACE.THREADS"],
        &["TERRACE.RECORD", "STOP"],
        &["TERRACE.RELOAD"],
    ] {
        for c in [&mut alice, &mut anonymous] {
            let e = err(c, argv);
            assert!(e.to_ascii_uppercase().contains("NOPERM") && e.contains("operator"), "{argv:?}: {e}");
        }
    }
    // TERRACE.* naming another tenant: refused; naming her own: answered.
    for argv in [
        &["TERRACE.COMPRESSION", "CONFIG", "bob", "compression", "none"][..],
        &["TERRACE.RETRAIN", "bob"],
        &["TERRACE.WORKLOAD", "bob"],
        &["TERRACE.ADVISE", "bob"],
        &["TERRACE.COSTEVAL", "SET", "bob", "{\"candidates\":[]}"],
        &["TERRACE.RECORD", "SAMPLE", "bob", "0"],
        &["TERRACE.WORKLOAD", "default"],
        &["TERRACE.WORKLOAD", ""],
    ] {
        let e = err(&mut alice, argv);
        assert!(e.to_ascii_uppercase().contains("NOPERM") && e.contains("tenant 'alice' may only name itself"), "{argv:?}: {e}");
    }
    let own: String = q(&mut alice, &["TERRACE.WORKLOAD", "alice"]);
    assert!(own.starts_with('{'), "{own}");
    // Refused inside a transaction too: the transaction is aborted.
    let mut raw = proxy.raw();
    raw.send(&encode(&["AUTH", "alice", "alicepw"]));
    raw.send(&encode(&["MULTI"]));
    raw.send(&encode(&["SET", "mine", "1"]));
    raw.send(&encode(&["CONFIG", "SET", "maxmemory", "1"]));
    raw.send(&encode(&["EXEC"]));
    let replies = raw.read_available();
    assert!(
        replies.starts_with("+OK\r\n+OK\r\n+QUEUED\r\n-NOPERM") && replies.ends_with("-EXECABORT Transaction discarded because of previous errors.\r\n"),
        "{replies:?}"
    );
    // CLIENT LIST: alice sees her own clients only; the admin user sees everyone's.
    let _: () = redis::cmd("CLIENT").arg("SETNAME").arg("alices-app").query(&mut alice).unwrap();
    let _: () = redis::cmd("CLIENT").arg("SETNAME").arg("anonymous-app").query(&mut anonymous).unwrap();
    let list: String = q(&mut alice, &["CLIENT", "LIST"]);
    assert!(list.contains("name=alices-app") && !list.contains("bobs-app") && !list.contains("anonymous-app"), "{list}");
    let mut admin = connect(&proxy, "admin", "adminpw");
    let all: String = q(&mut admin, &["CLIENT", "LIST"]);
    assert!(all.contains("name=bobs-app"), "{all}");
    // The operator keeps what tenants lose.
    assert_eq!(q::<Vec<String>>(&mut admin, &["CONFIG", "GET", "maxmemory"]), ["maxmemory", "0"]);
    // Nothing of bob's, and nothing the engines share, changed.
    assert_eq!(victim_view(&mut bob), before.0);
    assert_eq!(engines_state(&engines), before.1);
}

/// A raw client through the proxy as `user` (None: an unauthenticated client).
struct As {
    client: Client,
    user: Option<(&'static str, &'static str)>,
}

impl As {
    fn connect(port: u16, user: Option<(&'static str, &'static str)>) -> As {
        let mut a = As { client: Client::connect(port), user };
        a.authenticate();
        a
    }

    fn authenticate(&mut self) {
        if let Some((name, password)) = self.user {
            self.client.send(&[b"AUTH".to_vec(), name.as_bytes().to_vec(), password.as_bytes().to_vec()]);
            self.client.read(Duration::from_secs(10)).expect("AUTH answered");
        }
    }

    fn reconnect(&mut self) {
        self.client.reconnect();
        self.authenticate();
    }

    /// Sends every generated request for every command; answers how many were sent.
    fn every_command(&mut self) -> usize {
        let commands = describe_all(&mut self.client);
        assert!(commands.len() > 300, "COMMAND and COMMAND LIST describe {} commands", commands.len());
        let mut sent = 0;
        for d in &commands {
            let mut cases = generate(d);
            for hand in HAND_WRITTEN.iter().filter(|h| d.name == h[0] || d.name.split('|').collect::<Vec<_>>() == h[..2.min(h.len())]) {
                cases.push(hand.iter().map(|a| a.as_bytes().to_vec()).collect());
            }
            // (Logging in is not what this explores, and failed AUTHs would get this address
            // refused for a minute.)
            if d.name == "auth" || d.name == "hello" {
                continue;
            }
            for argv in cases.iter().filter(|a| !skipped(&d.name, a)) {
                sent += 1;
                self.client.send(argv);
                let wait = if d.blocking { Duration::from_millis(100) } else { Duration::from_secs(5) };
                match self.client.read(wait) {
                    Ok(()) if !changes_connection_mode(&d.name) && d.name != "reset" => {}
                    Ok(()) | Err(NoReply::Closed) => self.reconnect(),
                    Err(NoReply::Timeout) if d.blocking => self.reconnect(),
                    Err(NoReply::Timeout) => {
                        panic!("no reply through the proxy to {:?}", argv.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect::<Vec<_>>())
                    }
                }
            }
        }
        sent
    }
}

#[test]
fn every_command_as_a_tenant_or_unauthenticated_leaves_other_tenants_and_the_engines_alone() {
    let (engines, proxy) = appliance();
    for (attacker, victims) in [
        (Some(("alice", "alicepw")), &[("bob", "bobpw")][..]),
        (Some(("bob", "bobpw")), &[("alice", "alicepw")]),
        (None, &[("alice", "alicepw"), ("bob", "bobpw")]),
    ] {
        let mut views = Vec::new();
        for (name, password) in victims {
            let mut c = connect(&proxy, name, password);
            q::<()>(&mut c, &["FLUSHALL"]);
            write_victim_data(&mut c);
            views.push(victim_view(&mut c));
        }
        let shared = engines_state(&engines);
        let sent = As::connect(proxy.port, attacker).every_command();
        assert!(sent > 10_000, "only {sent} requests");
        for ((name, password), before) in victims.iter().zip(&views) {
            assert_eq!(&victim_view(&mut connect(&proxy, name, password)), before, "{name}'s keys after {attacker:?} ran every command");
        }
        assert_eq!(engines_state(&engines), shared, "the engines' settings after {attacker:?} ran every command");
        for e in &engines {
            assert_eq!(q::<String>(&mut e.client(), &["PING"]), "PONG");
        }
    }
}

/// A push as a RESP2 subscriber reads it: `*N` and bulk strings.
fn push(parts: &[&str]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", parts.len()).into_bytes();
    for p in parts {
        v.extend_from_slice(format!("${}\r\n{p}\r\n", p.len()).as_bytes());
    }
    v
}

/// A raw connection through the proxy, authenticated as a tenant, subscribed with `how`.
fn subscriber(proxy: &Proxy, tenant: &str, password: &str, how: &str, channel: &str) -> common::Raw {
    let mut s = proxy.raw();
    s.send(&encode(&["AUTH", tenant, password]));
    s.expect(b"+OK\r\n");
    s.send(&encode(&[how, channel]));
    // The confirmation ends with the subscription count, an integer.
    let head = format!("*3\r\n${}\r\n{}\r\n${}\r\n{channel}\r\n:1\r\n", how.len(), how.to_ascii_lowercase(), channel.len());
    s.expect(head.as_bytes());
    s
}

/// Channels, patterns and keyspace notifications belong to a tenant: a pattern subscriber
/// matching everything hears its own tenant's messages and events only, and PUBSUB lists
/// only its own tenant's channels.
#[test]
fn pub_sub_channels_patterns_and_keyspace_events_are_per_tenant() {
    let (_engines, proxy) = appliance();
    let mut alice_everything = subscriber(&proxy, "alice", "alicepw", "PSUBSCRIBE", "*");
    let mut alice_news = subscriber(&proxy, "alice", "alicepw", "SUBSCRIBE", "news");
    let mut bob_news = subscriber(&proxy, "bob", "bobpw", "SUBSCRIBE", "news");
    let mut alice = connect(&proxy, "alice", "alicepw");
    let mut bob = connect(&proxy, "bob", "bobpw");
    // Bob's message reaches bob's subscriber alone.
    assert_eq!(q::<i64>(&mut bob, &["PUBLISH", "news", "for bob"]), 1);
    bob_news.expect(&push(&["message", "news", "for bob"]));
    // Alice's subscribers' next messages are alice's own (bob's was published first, on the
    // same engine: had it reached them, it would come before).
    assert_eq!(q::<i64>(&mut alice, &["PUBLISH", "news", "for alice"]), 2);
    alice_news.expect(&push(&["message", "news", "for alice"]));
    alice_everything.expect(&push(&["pmessage", "*", "news", "for alice"]));
    // PUBSUB answers about the caller's own tenant.
    assert_eq!(q::<Vec<String>>(&mut alice, &["PUBSUB", "CHANNELS"]), ["news"]);
    assert_eq!(q::<i64>(&mut alice, &["PUBSUB", "NUMPAT"]), 1);
    assert_eq!(q::<i64>(&mut bob, &["PUBSUB", "NUMPAT"]), 0);
    assert_eq!(q::<Vec<(String, i64)>>(&mut bob, &["PUBSUB", "NUMSUB", "news"]), [("news".to_string(), 1)]);
    // Keyspace notifications are a tenant's own setting and events: alice turns hers on
    // (a tenant may set notify-keyspace-events, and no other parameter); bob's and the
    // default tenant's stay off, and bob's writes are no events of alice's. ({bar} keys
    // live on the engine the subscribers are on.)
    q::<()>(&mut alice, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    assert_eq!(q::<Vec<String>>(&mut alice, &["CONFIG", "GET", "notify-keyspace-events"]), ["notify-keyspace-events", "AKE"]);
    assert_eq!(q::<Vec<String>>(&mut bob, &["CONFIG", "GET", "notify-keyspace-events"]), ["notify-keyspace-events", ""]);
    let mut admin = connect(&proxy, "admin", "adminpw");
    assert_eq!(q::<Vec<String>>(&mut admin, &["CONFIG", "GET", "notify-keyspace-events"]), ["notify-keyspace-events", ""]);
    assert!(err(&mut alice, &["CONFIG", "SET", "notify-keyspace-events", "KEA", "maxmemory", "1"]).to_ascii_uppercase().contains("NOPERM"));
    q::<()>(&mut bob, &["SET", "{bar}bob", "1"]);
    q::<()>(&mut alice, &["SET", "{bar}alice", "1"]);
    alice_everything.expect(&push(&["pmessage", "*", "__keyspace@0__:{bar}alice", "set"]));
    alice_everything.expect(&push(&["pmessage", "*", "__keyevent@0__:set", "{bar}alice"]));
    // And with bob's subscriber gone, a message of bob's reaches no one.
    drop(bob_news);
    common::eventually(5, "bob's subscriber gone", || q::<Vec<(String, i64)>>(&mut bob, &["PUBSUB", "NUMSUB", "news"]) == [("news".to_string(), 0)]);
    assert_eq!(q::<i64>(&mut bob, &["PUBLISH", "news", "unheard"]), 0);
}

/// EVALSHA, SCRIPT EXISTS/FLUSH, FUNCTION LOAD/LIST/FLUSH and FCALL see the caller's own
/// tenant's scripts and libraries; a tenant's libraries are saved and loaded with its
/// namespace.
#[test]
fn scripts_and_functions_are_per_tenant() {
    let (mut engines, proxy) = appliance();
    let mut bob = connect(&proxy, "bob", "bobpw");
    write_victim_data(&mut bob);
    let mut alice = connect(&proxy, "alice", "alicepw");
    assert!(err(&mut alice, &["FCALL", "victim_fn", "0"]).contains("Function not found"));
    assert!(err(&mut alice, &["EVALSHA", VICTIM_SHA, "0"]).to_ascii_uppercase().contains("NOSCRIPT"));
    assert_eq!(q::<Vec<i64>>(&mut alice, &["SCRIPT", "EXISTS", VICTIM_SHA]), [0]);
    assert_eq!(q::<Vec<redis::Value>>(&mut alice, &["FUNCTION", "LIST"]), []);
    // The same library name is alice's own library; her flushes leave bob's alone.
    let mine = "#!lua name=victimlib\nredis.register_function('victim_fn', function() return 'alice' end)";
    assert_eq!(q::<String>(&mut alice, &["FUNCTION", "LOAD", mine]), "victimlib");
    assert_eq!(q::<String>(&mut alice, &["FCALL", "victim_fn", "0"]), "alice");
    q::<()>(&mut alice, &["FUNCTION", "FLUSH"]);
    q::<()>(&mut alice, &["SCRIPT", "FLUSH"]);
    assert_eq!(q::<String>(&mut bob, &["FCALL", "victim_fn", "0"]), "victim");
    assert_eq!(q::<String>(&mut bob, &["EVALSHA", VICTIM_SHA, "0"]), "cached victim");
    // Saved and loaded with its namespace: after a restart bob's library is bob's alone.
    let mut admin = connect(&proxy, "admin", "adminpw");
    q::<()>(&mut admin, &["SAVE"]);
    for e in engines.iter_mut() {
        e.restart_clean(&[]);
    }
    let mut direct = engines[0].client();
    assert_eq!(q::<Vec<redis::Value>>(&mut direct, &["FUNCTION", "LIST"]), [], "the default namespace has no library");
    q::<()>(&mut direct, &["TERRACE.NAMESPACE", "bob"]);
    assert_eq!(q::<String>(&mut direct, &["FCALL", "victim_fn", "0"]), "victim");
}

/// One engine and two tenants, connected directly as the proxy's connections are: a
/// tenant's script that runs for long holds its own namespace's keys and its reactor,
/// nothing else. The other tenant's reads, writes, transactions and scripts go on
/// meanwhile (on another reactor), and SCRIPT KILL, FUNCTION STATS and BUSY each concern the
/// caller's own tenant's script.
#[test]
fn a_tenants_long_script_holds_back_only_its_own_tenant() {
    let engine = Engine::start(&["--threads", "2"]);
    q::<()>(&mut engine.client(), &["CONFIG", "SET", "busy-reply-threshold", "100"]);
    let in_namespace = |tenant: &str| {
        let mut c = engine.client();
        q::<()>(&mut c, &["TERRACE.NAMESPACE", tenant]);
        c
    };
    q::<()>(&mut in_namespace("bob"), &["SET", "bob:k", "1"]);
    let mut alice = Raw::connect(engine.port);
    assert_eq!(alice.cmd(&["TERRACE.NAMESPACE", "alice"]), "+OK\r\n");
    alice.send(&encode(&["EVAL", "while true do end", "0"]));
    // (Raw: a connection that lands on the script's reactor before it is busy is answered
    // only once it is.)
    eventually(10, "alice's namespace answers BUSY while her script runs", || {
        let mut c = Raw::connect(engine.port);
        c.send(&[encode(&["TERRACE.NAMESPACE", "alice"]), encode(&["GET", "alice:k"])].concat());
        let reply = c.read_available();
        reply.contains("-BUSY")
    });

    // Bob's new connection goes to the reactor the script does not hold, and his keys are
    // not locked by it: everything of his runs.
    let mut bob = in_namespace("bob");
    assert_eq!(q::<String>(&mut bob, &["GET", "bob:k"]), "1");
    q::<()>(&mut bob, &["SET", "bob:k", "2"]);
    let (incr, get): (i64, String) = redis::pipe().atomic().cmd("INCR").arg("bob:k").cmd("GET").arg("bob:k").query(&mut bob).unwrap();
    assert_eq!((incr, get.as_str()), (3, "3"));
    assert_eq!(q::<i64>(&mut bob, &["EVAL", "return redis.call('INCR', KEYS[1])", "1", "bob:k"]), 4);
    assert!(q::<i64>(&mut bob, &["DBSIZE"]) == 1);
    // He can neither see nor stop alice's script.
    let kill = err(&mut bob, &["SCRIPT", "KILL"]);
    assert!(kill.to_ascii_uppercase().contains("NOTBUSY"), "bob stopped alice's script: {kill}");
    let stats: Vec<redis::Value> = q(&mut bob, &["FUNCTION", "STATS"]);
    assert_eq!(stats[1], redis::Value::Nil, "bob sees alice's running script: {stats:?}");

    // Alice sees hers, and stops it.
    let mut alice2 = in_namespace("alice");
    let stats: Vec<redis::Value> = q(&mut alice2, &["FUNCTION", "STATS"]);
    assert_ne!(stats[1], redis::Value::Nil, "alice does not see her running script");
    q::<()>(&mut alice2, &["SCRIPT", "KILL"]);
    let reply = alice.read_available();
    assert!(reply.contains("Script killed by user"), "{reply}");
    assert_eq!(q::<Option<String>>(&mut alice2, &["GET", "alice:k"]), None);
    assert_eq!(q::<String>(&mut in_namespace("bob"), &["GET", "bob:k"]), "4");
}
