use std::time::Duration;

use hermes_client::{ConnectOptions, Hermes};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), hermes_client::ClientError> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "nats://127.0.0.1:4222".into());
    // ConnectOptions: user and password, token, NKey seed, credentials file, inbox prefix.
    let hermes = Hermes::connect(&url, &ConnectOptions::default()).await?;
    // A tool served from this process: declared in [[tools.define]], called by the agent.
    let _worker = hermes
        .serve_tool("word_count", |call| async move {
            let text = call.arguments["text"].as_str().unwrap_or_default();
            Ok(json!({ "words": text.split_whitespace().count() }))
        })
        .await?;
    let mut chat = hermes.session("assistant", "readme-1", "u-1").await?;
    let turn = chat
        .turn("count these words", Duration::from_secs(60), |event| {
            println!("{}", event.type_name())
        })
        .await?;
    if let Some(call) = &turn.needs_confirmation {
        println!("waiting for a yes to {}", call.name); // chat.confirm_and_follow(true, …)
    }
    println!("{}", turn.answer.unwrap_or_default());
    Ok(())
}
