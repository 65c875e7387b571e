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

fn text(out: &Output) -> String {
    format!(
        "{}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

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
