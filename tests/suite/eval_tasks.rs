//! `hermes eval tasks`: the shipped seed suite passes with its scripted model, a failed check
//! is reported with its reason, `--baseline` judges regressions, and a suite runs against an
//! OpenAI-compatible server — all through the `hermes` binary.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{json, Value};

use crate::common::fake_openai::{FakeOpenAi, COMPLETION_TOKENS, PROMPT_TOKENS};
use crate::common::hermes_proc::hermes;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

use crate::common::hermes_proc::output_text as text;

fn eval_tasks(args: &[&str]) -> Output {
    hermes()
        .args(["eval", "tasks"])
        .args(args)
        .output()
        .unwrap()
}

fn json_report(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(out)))
}

/// A suite over the seed config and scenario with these cases appended.
fn seed_suite(dir: &Path, cases: &str) -> PathBuf {
    let config = repo("config/eval/seed-tasks.config.toml");
    let path = dir.join("suite.toml");
    let head = format!("config = {:?}\n", config.to_str().unwrap());
    std::fs::write(&path, head + cases).unwrap();
    path
}

const TWO_CASES: &str = r#"
[[case]]
name = "order"
user = "u-1001"
messages = ["帮我查一下订单 JD-20251111-0042 到哪了？"]
[case.expect]
tools_called = [{ name = "order_lookup", arguments = { order_id = "JD-20251111-0042" } }]
answer_contains = ["SF1428837610295"]

[[case]]
name = "style"
messages = ["记住：我喜欢简洁风格的回答，别太啰嗦。"]
[case.expect]
memory_written = ["简洁"]
"#;

#[test]
fn the_seed_suite_passes_every_case_with_its_scripted_model() {
    let suite = repo("config/eval/seed-tasks.toml");
    let out = eval_tasks(&["--suite", suite.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let report = json_report(&out);
    let cases = report["cases"].as_array().unwrap();
    assert!(cases.len() >= 20, "{} cases", cases.len());
    let failed: Vec<&Value> = cases.iter().filter(|c| c["passed"] != true).collect();
    assert!(failed.is_empty(), "failed: {failed:#?}");
    assert_eq!(report["model"], "replay:seed-tasks");
    assert_eq!(report["overall"]["completion_rate"], 1.0);
    let zh = cases
        .iter()
        .filter(|c| c["name"].as_str().unwrap().ends_with("-zh"))
        .count();
    let en = cases
        .iter()
        .filter(|c| c["name"].as_str().unwrap().ends_with("-en"))
        .count();
    assert!(zh >= 5 && en >= 5, "{zh} Chinese, {en} English cases");
    for case in cases {
        assert!(case["tokens"]["prompt"].as_u64().unwrap() > 0, "{case}");
        assert_eq!(case["tokens"]["source"], "counted", "{case}");
    }
    let story = cases
        .iter()
        .find(|c| c["name"] == "budget-recalled-next-session-zh")
        .unwrap();
    assert_eq!(
        (story["turns"].as_u64(), story["tool_rounds"].as_u64()),
        (Some(2), Some(2))
    );
}

#[test]
fn a_failed_check_is_reported_with_its_reason_and_the_command_exits_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let suite = seed_suite(
        dir.path(),
        &format!(
            "{TWO_CASES}{}",
            r#"
[[case]]
name = "wrong"
user = "u-1001"
messages = ["帮我查一下订单 JD-20251111-0042 到哪了？"]
[case.expect]
tools_called = [{ name = "order_lookup", arguments = { order_id = "JD-20251111-9999" } }]
answer_contains = ["已签收"]
memory_recalled = ["预算"]
max_tool_rounds = 0
"#
        ),
    );
    let out = eval_tasks(&["--suite", suite.to_str().unwrap()]);
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    for needle in [
        "order  pass",
        "style  pass",
        "wrong  FAIL",
        r#"✗ tools_called: no call of order_lookup with arguments ⊇ {"order_id":"JD-20251111-9999"} (calls: order_lookup {"order_id":"JD-20251111-0042"})"#,
        "✗ answer_contains: \"已签收\" is not in the answer \"订单 JD-20251111-0042",
        "✗ memory_recalled: no recalled memory holds \"预算\" (nothing was recalled)",
        "✗ max_tool_rounds: 1 tool rounds, at most 0 expected",
        "overall: 2/3 passed",
        "error: 1 of 3 cases failed",
    ] {
        assert!(all.contains(needle), "`{needle}` missing:\n{all}");
    }
}

#[test]
fn baseline_passes_when_equal_and_flags_a_case_that_stopped_passing_or_costlier_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let suite = seed_suite(dir.path(), TWO_CASES);
    let suite = suite.to_str().unwrap();
    let first = eval_tasks(&["--suite", suite, "--json"]);
    assert!(first.status.success(), "{}", text(&first));
    let baseline = dir.path().join("baseline.json");
    std::fs::write(&baseline, &first.stdout).unwrap();
    let baseline = baseline.to_str().unwrap();

    let same = eval_tasks(&["--suite", suite, "--baseline", baseline]);
    assert!(same.status.success(), "{}", text(&same));
    assert!(text(&same).contains("no regression"), "{}", text(&same));

    // The order case now expects something its answer does not say: it passed before.
    let broken = std::fs::read_to_string(suite).unwrap().replace(
        "answer_contains = [\"SF1428837610295\"]",
        "answer_contains = [\"SF0\"]",
    );
    let broken_suite = dir.path().join("broken.toml");
    std::fs::write(&broken_suite, broken).unwrap();
    let out = eval_tasks(&[
        "--suite",
        broken_suite.to_str().unwrap(),
        "--baseline",
        baseline,
        "--json",
    ]);
    assert!(!out.status.success(), "{}", text(&out));
    let regressions = json_report(&out)["comparison"]["regressions"].clone();
    assert_eq!(
        regressions[0],
        "case order passed in the baseline and fails now: answer_contains: \"SF0\" is not in the \
         answer \"订单 JD-20251111-0042（索尼 WH-1000XM5 耳机）正在运输中：顺丰单号 \
         SF1428837610295，已到达上海浦东分拨中心，下一站派送。\""
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("regression(s) against the baseline"));

    // A baseline whose tasks cost half the tokens: this run's rise is beyond the tolerance.
    let mut cheaper: Value = serde_json::from_slice(&first.stdout).unwrap();
    for case in cheaper["cases"].as_array_mut().unwrap() {
        let prompt = case["tokens"]["prompt"].as_u64().unwrap();
        case["tokens"]["prompt"] = json!(prompt / 2);
    }
    let cheaper_path = dir.path().join("cheaper.json");
    std::fs::write(&cheaper_path, cheaper.to_string()).unwrap();
    let out = eval_tasks(&[
        "--suite",
        suite,
        "--baseline",
        cheaper_path.to_str().unwrap(),
    ]);
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(
        all.contains("REGRESSION mean tokens per task rose"),
        "{all}"
    );
    let out = eval_tasks(&[
        "--suite",
        suite,
        "--baseline",
        cheaper_path.to_str().unwrap(),
        "--tolerance",
        "150",
    ]);
    assert!(
        out.status.success(),
        "a wide tolerance allows it: {}",
        text(&out)
    );
}

#[test]
fn a_suite_runs_against_an_openai_compatible_server_and_reports_its_usage() {
    let (_rt, fake) = FakeOpenAi::start_auto("add", json!({"a": 2, "b": 3}));
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("openai.toml");
    let model = |role: &str| {
        format!(
            "[models.{role}]\nprovider = \"openai\"\nmodel = \"gpt-4o-mini\"\nbase_url = \"{}\"\nmax_retries = 0\n",
            fake.base_url()
        )
    };
    let models = [model("planner"), model("extractor"), model("summariser")].concat();
    std::fs::write(
        &config,
        models + "[memory.embedder]\nkind = \"none\"\n[tools]\nbuiltin = [\"add\"]\n",
    )
    .unwrap();
    let suite = dir.path().join("suite.toml");
    std::fs::write(
        &suite,
        r#"
[[case]]
name = "sum"
messages = ["What is 2 + 3?"]
[case.expect]
tools_called = [{ name = "add", arguments = { a = 2, b = 3 } }]
answer_contains = ["done:", "5"]
max_tool_rounds = 1
"#,
    )
    .unwrap();
    let out = hermes()
        .arg("--config")
        .arg(&config)
        .args(["eval", "tasks", "--json", "--suite"])
        .arg(&suite)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let report = json_report(&out);
    assert_eq!(report["model"], "openai:gpt-4o-mini");
    let case = &report["cases"][0];
    assert_eq!(case["passed"], true, "{case}");
    assert_eq!(case["tool_rounds"], 1);
    // Two planning calls, each with the fake's reported usage.
    assert_eq!(
        case["tokens"],
        json!({"prompt": 2 * PROMPT_TOKENS, "completion": 2 * COMPLETION_TOKENS, "source": "reported"})
    );
    let planned = fake
        .requests()
        .iter()
        .filter(|r| r["tools"].is_array())
        .count();
    assert!(planned >= 2, "{:#?}", fake.requests());
}

#[test]
fn help_teaches_the_format_and_a_bad_suite_is_refused_by_name() {
    let out = eval_tasks(&["--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "Examples:",
        "--baseline baseline.json",
        "[case.expect]",
        "tools_called",
        "memory_recalled",
        "A regression is",
        "Exit status",
    ] {
        assert!(
            help.contains(needle),
            "`{needle}` missing from --help:\n{help}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("bad.toml");
    std::fs::write(&suite, "[[case]]\nname = \"no-input\"\n").unwrap();
    let out = eval_tasks(&["--suite", suite.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("case `no-input`") && err.contains("exactly one of `messages"),
        "{err}"
    );
}

/// One row of the table: `[name, result, rounds, p+c, cached %, "%", reasoning, cost, ms, "ms"]`.
fn row<'a>(table: &'a str, case: &str) -> Vec<&'a str> {
    table
        .lines()
        .find(|l| l.starts_with(case))
        .unwrap_or_else(|| panic!("no row for {case}:\n{table}"))
        .split_whitespace()
        .collect()
}

#[test]
fn the_seed_suite_runs_on_each_reasoning_provider_printing_tokens_cached_share_and_cost() {
    use crate::common::fake_anthropic::FakeAnthropic;
    use crate::common::fake_responses::FakeResponses;
    let lookup = json!({"order_id": "JD-20251111-0043"});
    let (_responses_rt, responses) = FakeResponses::start_auto("order_lookup", lookup.clone());
    let (_anthropic_rt, anthropic) = FakeAnthropic::start_auto("order_lookup", lookup);
    let price =
        "price = { input_per_mtok = 3.0, cached_input_per_mtok = 0.3, output_per_mtok = 15.0 }";
    let tables = [
        (
            "responses",
            format!(
                "provider = \"openai-responses\"\nmodel = \"gpt-5-mini\"\nbase_url = \"{}\"\n\
                 reasoning_effort = \"low\"\nmax_retries = 0\n{price}\n",
                responses.base_url()
            ),
        ),
        (
            "anthropic",
            format!(
                "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\nbase_url = \"{}\"\n\
                 thinking_budget = 1024\nmax_tokens = 4096\nmax_retries = 0\n{price}\n",
                anthropic.base_url()
            ),
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (name, table) in tables {
        let config = dir.path().join(format!("{name}.toml"));
        let models: String = ["planner", "extractor", "summariser"]
            .iter()
            .map(|role| format!("[models.{role}]\n{table}\n"))
            .collect();
        std::fs::write(&config, models + "[memory.embedder]\nkind = \"none\"\n").unwrap();
        let out = hermes()
            .arg("--config")
            .arg(&config)
            .args(["eval", "tasks", "--suite"])
            .arg(repo("config/eval/seed-tasks.toml"))
            .args(["--case", "order-followup-in-session-zh"])
            .output()
            .unwrap();
        let all = text(&out);
        let table = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            table.contains("CACHED") && table.contains("COST"),
            "{name}: {all}"
        );
        let cells = row(&table, "order-followup-in-session-zh");
        let cached: f64 = cells[4].parse().unwrap();
        let reasoning: u64 = cells[6].parse().unwrap();
        let cost: f64 = cells[7]
            .parse()
            .unwrap_or_else(|_| panic!("{name}: no cost in {cells:?}"));
        // The second turn's prompt begins with the first's: the fake's cache serves it.
        assert!(cached > 0.0, "{name}: {all}");
        assert!(reasoning > 0, "{name}: {all}");
        assert!(cost > 0.0, "{name}: {all}");
        assert!(table.contains("mean cost per task"), "{name}: {all}");
        eprintln!("{name}: {}", cells.join(" "));
    }
    assert!(responses.requests().len() >= 4 && anthropic.requests().len() >= 4);
}
