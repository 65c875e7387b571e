use super::*;

use crate::bus::Message;

/// Echoes the request's payload back, upper-cased.
struct Shout;

#[async_trait]
impl Handler for Shout {
    async fn handle(&self, message: Message) -> Option<Bytes> {
        Some(Bytes::from(
            String::from_utf8_lossy(&message.payload).to_uppercase(),
        ))
    }
}

async fn embedded(dir: &Path) -> SharedBus {
    let db = crate::store::open_durable(&dir.join("data"), crate::store::durability::Mode::Sync)
        .unwrap();
    crate::bus::connect("embedded", Some(db)).await.unwrap()
}

const T: Duration = Duration::from_secs(5);

#[tokio::test]
async fn requests_reach_the_serving_bus_and_only_the_listed_subjects_pass() {
    let dir = tempfile::tempdir().unwrap();
    let bus = embedded(dir.path()).await;
    let _serving = bus
        .serve(subjects::SESSIONS_LIST, "session", Arc::new(Shout))
        .await
        .unwrap();
    let _plan = bus
        .serve(subjects::PLAN, "planner", Arc::new(Shout))
        .await
        .unwrap();
    let socket = listen(bus.clone(), dir.path(), 1024, 16).await.unwrap();
    let mode = std::fs::metadata(socket.path())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "only its owner may use the socket");

    let client = SocketBus::find(dir.path()).await.expect("a live socket");
    let reply = client
        .request(subjects::SESSIONS_LIST, Bytes::from_static(b"hello"), T)
        .await
        .unwrap();
    assert_eq!(&reply[..], b"HELLO");

    let refused = client
        .request(subjects::PLAN, Bytes::from_static(b"x"), T)
        .await
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("does not forward `hermes.plan`"),
        "{refused}"
    );
    let nobody = client
        .request(subjects::MEMORY_LIST, Bytes::from_static(b"x"), T)
        .await
        .unwrap_err();
    assert!(matches!(nobody, BusError::NoResponders { .. }), "{nobody}");
    let too_big = client
        .request(subjects::SESSIONS_LIST, Bytes::from(vec![b'a'; 2048]), T)
        .await
        .unwrap_err();
    assert!(too_big.to_string().contains("over the limit"), "{too_big}");
    assert!(client.publish("x", Bytes::new()).await.is_err());
}

#[tokio::test]
async fn a_socket_left_by_a_dead_process_is_not_found_and_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    assert!(SocketBus::find(dir.path()).await.is_none(), "no socket yet");
    let bus = embedded(dir.path()).await;
    let path = {
        let socket = listen(bus.clone(), dir.path(), 1024, 16).await.unwrap();
        let path = socket.path().to_path_buf();
        assert!(SocketBus::find(dir.path()).await.is_some());
        path
    };
    assert!(!path.exists(), "a stopped socket removes its file");

    // A process killed with -9 leaves its socket file behind, with nobody listening.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    assert!(SocketBus::find(dir.path()).await.is_none());
    let _socket = listen(bus, dir.path(), 1024, 16).await.unwrap();
    assert!(SocketBus::find(dir.path()).await.is_some());
}

#[tokio::test]
async fn the_socket_keeps_serving_after_bad_connections() {
    let dir = tempfile::tempdir().unwrap();
    let bus = embedded(dir.path()).await;
    let _serving = bus
        .serve(subjects::SESSIONS_LIST, "session", Arc::new(Shout))
        .await
        .unwrap();
    let socket = listen(bus.clone(), dir.path(), 1024, 16).await.unwrap();
    // One client hangs up at once, one sends garbage lengths, one sends half a request.
    drop(UnixStream::connect(socket.path()).await.unwrap());
    let mut garbage = UnixStream::connect(socket.path()).await.unwrap();
    garbage.write_all(&[0xff; 16]).await.unwrap();
    let mut half = UnixStream::connect(socket.path()).await.unwrap();
    half.write_u32(200).await.unwrap();
    drop(half);
    let mut answer = Vec::new();
    let _ = garbage.read_to_end(&mut answer).await;

    let client = SocketBus::find(dir.path()).await.expect("a live socket");
    let reply = client
        .request(
            subjects::SESSIONS_LIST,
            Bytes::from_static(b"still here"),
            T,
        )
        .await
        .unwrap();
    assert_eq!(&reply[..], b"STILL HERE");
}
