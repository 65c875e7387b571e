//! `hermes chat --trace`: every event of each turn, printed as `hermes send` prints them — the
//! engine's trace, for debugging. A paused high-risk call asks `[y/N]` on the next line.

use std::io::BufRead;
use std::time::Duration;

use hermes_client::{SessionClient, TurnTrace};

use super::talk::Who;
use crate::cli::print::Printer;

pub async fn run(client: &mut SessionClient, who: &Who, timeout: Duration) -> anyhow::Result<()> {
    let mut printer = Printer::default();
    eprintln!(
        "hermes chat — agent `{}`, session `{}`, user `{}`. Ctrl-D ends.",
        who.agent, who.session, who.user
    );
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    while let Some(line) = rx.recv().await {
        if line.trim().is_empty() {
            continue;
        }
        let mut result = client.turn(&line, timeout, |e| printer.event(e)).await;
        // A paused turn asks here; the answer resumes it.
        while let Ok(TurnTrace {
            needs_confirmation: Some(pending),
            ..
        }) = &result
        {
            let call = pending.call_id.clone();
            if !pending.questions.is_empty() {
                // A server's question: a JSON line answers it, an empty line sends the form's
                // defaults, `no` declines.
                eprint!(
                    "`{}` asks: {} — answer (JSON; empty: defaults; no: decline): ",
                    pending.name, pending.message
                );
                let line = rx.recv().await.unwrap_or_default();
                let line = line.trim();
                result = match line {
                    "" => {
                        client
                            .confirm_and_follow(true, Some(&call), timeout, |e| printer.event(e))
                            .await
                    }
                    "n" | "no" => {
                        client
                            .confirm_and_follow(false, Some(&call), timeout, |e| printer.event(e))
                            .await
                    }
                    json => match serde_json::from_str(json) {
                        Ok(answer) => {
                            client
                                .answer_and_follow(&call, answer, timeout, |e| printer.event(e))
                                .await
                        }
                        Err(e) => {
                            eprintln!("not JSON ({e}); answer again");
                            continue;
                        }
                    },
                };
                continue;
            }
            eprint!("run `{}` (call {})? [y/N] ", pending.name, pending.call_id);
            let approve = rx
                .recv()
                .await
                .is_some_and(|a| matches!(a.trim(), "y" | "Y" | "yes"));
            result = client
                .confirm_and_follow(approve, Some(&call), timeout, |e| printer.event(e))
                .await;
        }
        if let Err(e) = result {
            eprintln!("error: {e}");
        }
    }
    Ok(())
}
