//! Traces: a turn split over two `hermes serve` processes on a real nats-server arrives at a
//! local OTLP receiver as one trace — GenAI spans (`invoke_agent`, `chat`, `execute_tool`) and
//! the MCP client span from both processes — and the trace reaches the MCP server in `_meta`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::json;

use crate::common::fake_openai::{FakeOpenAi, COMPLETION_TOKENS, PROMPT_TOKENS};
use crate::common::hermes_proc::{send_json, Serve};
use crate::common::nats_server::NatsServer;
use crate::common::otlp_receiver::{OtlpReceiver, ReceivedSpan};
use crate::common::trace_probe_mcp;

const CLIENT: i32 = 3;
const SERVER: i32 = 2;

/// Spans leave a serve process within this many milliseconds of ending (the SDK's default
/// is 5 s), so a test can wait for a span — for the turn to be over — before it stops the
/// process.
const BATCH_DELAY: (&str, &str) = ("OTEL_BSP_SCHEDULE_DELAY", "100");

/// `hermes serve` exporting spans soon after they end.
fn serve(config: &Path, bus: &str, actors: &str) -> Serve {
    Serve::start_with_env(config, bus, actors, &[], &[BATCH_DELAY])
}

/// A serve config: an OpenAI-compatible model at `model_url` (it reports token usage), the
/// probe MCP server, spans to `receiver` as `service`.
fn write_config(
    dir: &Path,
    service: &str,
    model_url: &str,
    probe: &str,
    receiver: &str,
) -> PathBuf {
    let model = |role: &str| {
        format!(
            "[models.{role}]\nprovider = \"openai\"\nmodel = \"gpt-4o-mini\"\nbase_url = \"{model_url}\"\nmax_retries = 0\n"
        )
    };
    let config = format!(
        r#"
[engine]
data_dir = "{data}"
{planner}{extractor}{summariser}
[memory.embedder]
kind = "none"

[[mcp.servers]]
name = "probe"
url = "{probe}"

[telemetry]
otlp_endpoint = "{receiver}"
service_name = "{service}"
"#,
        data = dir.join(format!("{service}-data")).display(),
        planner = model("planner"),
        extractor = model("extractor"),
        summariser = model("summariser"),
    );
    let path = dir.join(format!("{service}.toml"));
    std::fs::write(&path, config).unwrap();
    path
}

fn named<'a>(spans: &'a [ReceivedSpan], name: &str) -> Vec<&'a ReceivedSpan> {
    spans.iter().filter(|s| s.name == name).collect()
}

/// The chain of parents from `span` up to the root, `span` first.
fn ancestry<'a>(spans: &'a [ReceivedSpan], span: &'a ReceivedSpan) -> Vec<&'a ReceivedSpan> {
    let mut chain = vec![span];
    while let Some(parent) = chain
        .last()
        .filter(|s| !s.parent_span_id.is_empty())
        .and_then(|s| spans.iter().find(|p| p.span_id == s.parent_span_id))
    {
        chain.push(parent);
    }
    chain
}

#[test]
fn a_turn_across_two_processes_is_one_trace_at_the_otlp_receiver() {
    let receiver = OtlpReceiver::start();
    let (_model_rt, model) = FakeOpenAi::start_auto("probe__lookup", json!({"sku": "X1"}));
    let probe_rt = crate::common::runtime::multi_thread(1);
    let (probe_url, probe_seen) = probe_rt.block_on(trace_probe_mcp::start());
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = |service: &str| {
        write_config(
            dir.path(),
            service,
            &model.base_url(),
            &probe_url,
            &receiver.endpoint(),
        )
    };
    let tools = serve(
        &config("hermes-tools"),
        &nats.url(),
        "tool-executor,mcp-bridge",
    );
    let front = serve(
        &config("hermes-front"),
        &nats.url(),
        "session,planner,memory-extractor",
    );

    let stdout = send_json(&nats.url(), "t1", "u1", "Is X1 in stock?");
    assert!(stdout.contains("in stock: 3"), "{stdout}");

    // A span is exported once it ends: the turn's once the turn is over (its answer leaves a
    // moment before). A clean stop then exports whatever is still queued.
    receiver.wait_for(Duration::from_secs(20), |spans| {
        [
            "invoke_agent assistant",
            "execute_tool probe__lookup",
            "tools/call lookup",
        ]
        .iter()
        .all(|name| spans.iter().any(|s| s.name == *name))
    });
    front.stop();
    tools.stop();
    let spans = receiver.spans();
    let summary: Vec<String> = spans
        .iter()
        .map(|s| {
            format!(
                "{} [{}] {}<-{}",
                s.name, s.service, s.span_id, s.parent_span_id
            )
        })
        .collect();

    // invoke_agent: the turn, in the session's process, the root of the trace.
    let turns = named(&spans, "invoke_agent assistant");
    assert_eq!(turns.len(), 1, "{summary:#?}");
    let turn = turns[0];
    assert_eq!(turn.service, "hermes-front");
    assert_eq!(turn.attr("gen_ai.operation.name"), Some("invoke_agent"));
    assert_eq!(turn.attr("gen_ai.agent.name"), Some("assistant"));
    assert_eq!(turn.attr("gen_ai.conversation.id"), Some("t1"));
    assert!(turn.attr("hermes.turn.id").is_some(), "{turn:?}");
    assert_eq!(
        turn.attr("gen_ai.usage.input_tokens"),
        Some((2 * PROMPT_TOKENS).to_string().as_str()),
        "two model calls: {turn:?}"
    );
    assert_eq!(
        turn.attr("gen_ai.usage.output_tokens"),
        Some((2 * COMPLETION_TOKENS).to_string().as_str())
    );
    let trace = turn.trace_id.clone();

    // chat: each model call of the planner, with the model and the usage it reported.
    let chats = named(&spans, "chat gpt-4o-mini");
    assert_eq!(chats.len(), 2, "a tool call, then the answer: {summary:#?}");
    for chat in &chats {
        assert_eq!(chat.service, "hermes-front");
        assert_eq!(chat.kind, CLIENT);
        assert_eq!(chat.attr("gen_ai.operation.name"), Some("chat"));
        assert_eq!(chat.attr("gen_ai.provider.name"), Some("openai"));
        assert_eq!(chat.attr("gen_ai.request.model"), Some("gpt-4o-mini"));
        assert_eq!(
            chat.attr("gen_ai.usage.input_tokens"),
            Some(PROMPT_TOKENS.to_string().as_str())
        );
        assert_eq!(
            chat.attr("gen_ai.usage.output_tokens"),
            Some(COMPLETION_TOKENS.to_string().as_str())
        );
        assert_eq!(chat.parent_span_id, turn.span_id, "{summary:#?}");
    }

    // execute_tool: in the tool-executor's process, a descendant of the turn over NATS.
    let executions = named(&spans, "execute_tool probe__lookup");
    assert_eq!(executions.len(), 1, "{summary:#?}");
    let execution = executions[0];
    assert_eq!(execution.service, "hermes-tools");
    assert_eq!(
        execution.attr("gen_ai.operation.name"),
        Some("execute_tool")
    );
    assert_eq!(execution.attr("gen_ai.tool.name"), Some("probe__lookup"));
    assert_eq!(execution.attr("gen_ai.tool.type"), Some("extension"));
    assert!(execution
        .attr("gen_ai.tool.call.id")
        .is_some_and(|id| !id.is_empty()));
    assert_ne!(execution.pid, turn.pid, "two processes");
    let up = ancestry(&spans, execution);
    assert_eq!(
        up.last().map(|s| &s.span_id),
        Some(&turn.span_id),
        "execute_tool leads up to the turn: {summary:#?}"
    );
    let received = up[1];
    assert_eq!(received.name, "process hermes.tool.probe__lookup");
    assert_eq!(received.kind, SERVER);
    assert_eq!(received.attr("messaging.system"), Some("nats"));

    // The MCP-bridge's call: a client span with mcp.method.name, under execute_tool.
    let calls = named(&spans, "tools/call lookup");
    assert_eq!(calls.len(), 1, "{summary:#?}");
    let call = calls[0];
    assert_eq!(call.service, "hermes-tools");
    assert_eq!(call.kind, CLIENT);
    assert_eq!(call.attr("mcp.method.name"), Some("tools/call"));
    assert_eq!(call.attr("gen_ai.tool.name"), Some("lookup"));
    assert!(ancestry(&spans, call)
        .iter()
        .any(|s| s.span_id == execution.span_id));

    // One trace, from both processes.
    for span in [turn, chats[0], chats[1], execution, received, call] {
        assert_eq!(span.trace_id, trace, "{summary:#?}");
    }

    // The MCP server got the trace in `_meta`: the bridge's client span is its parent.
    let seen = probe_seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![Some(format!("00-{trace}-{}-01", call.span_id))],
        "{summary:#?}"
    );
}

#[test]
fn an_mcp_call_with_a_traceparent_in_meta_continues_that_trace_in_hermes_own_server() {
    use rmcp::model::{CallToolRequestParams, RequestParamsMeta};
    use rmcp::ServiceExt;

    let receiver = OtlpReceiver::start();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mcp.toml");
    let text = format!(
        "[mcp]\nservers = []\n[memory.embedder]\nkind = \"none\"\n[telemetry]\notlp_endpoint = \"{}\"\nservice_name = \"hermes-mcp\"\n",
        receiver.endpoint()
    );
    std::fs::write(&config, text).unwrap();
    let (trace, caller) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let rt = crate::common::runtime::multi_thread(1);
    rt.block_on(async {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_hermes"))
            .arg("--config")
            .arg(&config)
            .args(["mcp", "serve", "--stdio", "--user", "dana", "--data-dir"])
            .arg(dir.path().join("db"))
            .env("HERMES_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let io = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
        let client = ().serve(io).await.expect("hermes mcp serve initializes");
        let mut params = CallToolRequestParams::new("memory_search")
            .with_arguments(json!({"query": "anything"}).as_object().unwrap().clone());
        params.set_traceparent(&format!("00-{trace}-{caller}-01"));
        let found = client.peer().call_tool(params).await.unwrap();
        assert_ne!(found.is_error, Some(true), "{found:?}");
        // Closing stdin ends the server, which exports its spans as it exits.
        client.cancel().await.unwrap();
        let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
            .await
            .expect("hermes mcp serve exits when its client goes")
            .unwrap();
        assert!(status.success(), "{status}");
    });

    let spans = receiver.wait_for(Duration::from_secs(10), |spans| {
        spans.iter().any(|s| s.name == "tools/call memory_search")
    });
    let served = named(&spans, "tools/call memory_search");
    assert_eq!(served.len(), 1, "{spans:#?}");
    let served = served[0];
    assert_eq!(served.service, "hermes-mcp");
    assert_eq!(served.kind, SERVER);
    assert_eq!(served.attr("mcp.method.name"), Some("tools/call"));
    assert_eq!(served.attr("gen_ai.tool.name"), Some("memory_search"));
    assert_eq!(served.trace_id, trace, "the caller's trace goes on");
    assert_eq!(
        served.parent_span_id, caller,
        "the caller's span is its parent"
    );
}

#[test]
fn a_turn_that_waits_for_an_async_job_resumes_in_the_same_trace() {
    use crate::common::scenario::*;

    let receiver = OtlpReceiver::start();
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let script = Scenario::new("traced-job")
        .rule(
            on_user(&["report"]).calls("generate_report", json!({"topic": "phones", "seconds": 1})),
        )
        .rule(after_tool("generate_report").says("Your report is ready."))
        .rule(
            on_user(&[])
                .role("extractor")
                .says("{\"memory_updates\": []}"),
        );
    let config = write_serve_config(dir.path(), "traced-job", &script);
    let telemetry = format!(
        "[memory.embedder]\nkind = \"none\"\n[telemetry]\notlp_endpoint = \"{}\"\n",
        receiver.endpoint()
    );
    let text = std::fs::read_to_string(&config).unwrap() + &telemetry;
    std::fs::write(&config, text).unwrap();
    let process = serve(&config, &nats.url(), "all");
    let stdout = send_json(&nats.url(), "j1", "u1", "a report on phones");
    assert!(stdout.contains("Your report is ready."), "{stdout}");
    let spans = receiver.wait_for(Duration::from_secs(20), |spans| {
        named(spans, "invoke_agent assistant").len() >= 2
    });
    process.stop();
    let mut runs = named(&spans, "invoke_agent assistant");
    assert_eq!(
        runs.len(),
        2,
        "the run that submits the job, the run it wakes: {spans:#?}"
    );
    runs.sort_by_key(|s| !s.parent_span_id.is_empty());
    let (first, resumed) = (runs[0], runs[1]);
    assert_eq!(
        resumed.trace_id, first.trace_id,
        "one trace for the whole turn"
    );
    assert_eq!(resumed.parent_span_id, first.span_id, "{spans:#?}");
    assert_eq!(resumed.attr("hermes.turn.id"), first.attr("hermes.turn.id"));
    let submitted = named(&spans, "execute_tool generate_report");
    assert_eq!(submitted.len(), 1, "{spans:#?}");
    assert_eq!(submitted[0].trace_id, first.trace_id);
}
