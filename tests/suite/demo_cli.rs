//! `hermes demo` plays the seeds' story and checks its own trace.

use crate::common::hermes_proc::hermes;

#[test]
fn demo_exits_zero_and_its_trace_shows_every_step_of_the_story() {
    let out = hermes().arg("demo").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "demo failed:\n{stdout}\n{stderr}");
    for needle in [
        "[memory.recalled]",
        "headphone_budget",
        "headphone_brand",
        "[tool.call] order_lookup",
        "auto_corrected: true",
        "via mcp:catalog",
        "[answer]",
        "[memory.written]",
    ] {
        assert!(
            stdout.contains(needle),
            "`{needle}` missing from the trace:\n{stdout}"
        );
    }
    assert!(!stdout.contains("[ ]"), "a demo check failed:\n{stdout}");
}

#[test]
fn help_teaches_each_command() {
    for cmd in ["demo", "serve", "send", "chat", "bench"] {
        let out = hermes().args([cmd, "--help"]).output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.len() > 200,
            "`hermes {cmd} --help` is too thin:\n{text}"
        );
    }
    let out = hermes()
        .args(["serve", "--actors", "planr"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("choose from"));
}
