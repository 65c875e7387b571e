//! Mid-turn steps kept back until the turn's next commit point ([`super::state`]): a quick
//! turn writes its read steps with its answer, a slow one stores them as it goes.

use std::sync::{Arc, Mutex, OnceLock};

use serde_json::json;

use super::fake::FakePorts;
use super::state::DEFER_AT_MOST;
use super::tests::{calls, says, tool, Session};
use crate::llm::Role;
use crate::store::sessions::SessionStore;

/// A turn that reads with `first`, then with `peek` (which counts the session's stored
/// messages), then answers; what `peek` counted.
async fn stored_when_peeking(first_takes: std::time::Duration) -> Vec<usize> {
    let store: Arc<OnceLock<SessionStore>> = Arc::default();
    let counted: Arc<Mutex<Vec<usize>>> = Arc::default();
    let ports =
        FakePorts::new(
            |r| match r.messages.iter().filter(|m| m.role == Role::Tool).count() {
                0 => calls("first", json!({})),
                1 => calls("peek", json!({})),
                _ => says("done"),
            },
        )
        .tool(tool("first"), move |_| {
            std::thread::sleep(first_takes);
            Ok(json!({"ok": true}))
        })
        .tool(tool("peek"), {
            let (store, counted) = (store.clone(), counted.clone());
            move |_| {
                let (_, log, _) = store.get().unwrap().load("assistant", "s1").unwrap();
                counted.lock().unwrap().push(log.len());
                Ok(json!({"ok": true}))
            }
        });
    let mut s = Session::new(ports);
    let _ = store.set(s.env.store.clone());
    let outcome = s.say("look it up").await;
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    s.reload();
    assert_eq!(s.log.len(), 6, "the answer stores every step");
    let counted = counted.lock().unwrap().clone();
    counted
}

#[tokio::test]
async fn a_quick_turn_stores_its_read_steps_with_its_answer() {
    let counted = stored_when_peeking(std::time::Duration::ZERO).await;
    assert_eq!(counted, [1], "only the user's message is stored mid-turn");
}

#[tokio::test]
async fn a_slow_read_is_stored_as_soon_as_its_result_is_there() {
    let counted = stored_when_peeking(DEFER_AT_MOST + DEFER_AT_MOST / 5).await;
    // The user's message, the call of the slow read and its result.
    assert_eq!(counted, [3]);
}
