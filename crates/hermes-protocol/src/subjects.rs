//! Every subject name Hermes uses, in one place, and the id rules that keep them safe.
//!
//! | subject | pattern | what |
//! |---|---|---|
//! | `hermes.in.<agent>.<session>` | pub or req/reply, queue `session` | a user message or external event for a session |
//! | `hermes.in.<agent>.<session>.<publisher>` | the same | the same, from the publisher whose NATS identity may use that last token: its `user` is checked against `[bus.publishers]` |
//! | `hermes.out.<agent>.<session>.<reader>` | pub | turn events: `turn.started`, `delta`, `tool.call`, `tool.result`, `answer`, `error`; `<reader>` is who may read them: the publisher that speaks for the session's user (`shop` for `cust-*`), else the user itself (a person), `_` for a message that named no user |
//! | `hermes.plan` | req/reply, queue `planner` | one planning step |
//! | `hermes.summarise` | req/reply, queue `planner` | fold older turns into the history summary |
//! | `hermes.sessions.search` | req/reply, queue `session` | BM25 search over a user's past messages |
//! | `hermes.sessions.list` / `.show` | req/reply, queue `session` | stored sessions, newest first / one session with its messages, paged (read-only) |
//! | `hermes.tool.<name>` | req/reply, queue `tool` | execute one validated call |
//! | `hermes.tools.list` | req/reply | the tool catalog (names, descriptions, schemas, definitions, metrics) |
//! | `hermes.tools.metrics` | req/reply | the tool-executor's counters |
//! | `hermes.tools.changed` | pub | the tool catalog changed (sessions drop their cached copy) |
//! | `hermes.job.<id>` | pub | async job lifecycle |
//! | `hermes.mcp.call`, `hermes.mcp.catalog` | req/reply, queue `mcp` | MCP calls; catalog of mounted servers (tools, resources, prompts, status) |
//! | `hermes.mcp.read`, `hermes.mcp.prompt` | req/reply, queue `mcp` | read a mounted server's resource; get one of its prompts |
//! | `hermes.mcp.audit` | req/reply, queue `mcp` | the latest MCP audit records (sled tree `mcp_audit`) |
//! | `hermes.mcp.changed` | pub | the bridge's catalog after a server (re)connected, died or changed its lists |
//! | `hermes.memory.recall` / `.write` / `.forget` / `.list` | req/reply, queue `memory` | memory service (the memory-extractor); `.list`: a user's live memories, or one by id |
//! | `hermes.memory.extract` | durable queue | finished turns to mine for memories |
//! | `hermes.audit.<kind>` | pub | audit trail |
//! | `hermes.status` | pub, every process | a status request; each process answers on its `reply_to` |
//! | `hermes.backup` | req/reply, control socket only | a `hermes serve` on the embedded bus writes a backup of its data directory |

/// Queue group names.
pub mod groups {
    pub const SESSION: &str = "session";
    pub const PLANNER: &str = "planner";
    pub const TOOL: &str = "tool";
    pub const MCP: &str = "mcp";
    pub const MEMORY: &str = "memory";
}

pub const INBOUND_ALL: &str = "hermes.in.>";
/// Every async job's lifecycle events (sessions wait on their jobs' completion).
pub const JOB_ALL: &str = "hermes.job.*";
/// What every job subject starts with.
pub const JOB_PREFIX: &str = "hermes.job.";
/// The durable queue async jobs run from on a cluster: any tool-executor copy takes a job,
/// and another takes it over when that copy dies.
pub const JOB_QUEUE: &str = "hermes.jobqueue";
pub const PLAN: &str = "hermes.plan";
pub const SUMMARISE: &str = "hermes.summarise";
pub const SESSIONS_SEARCH: &str = "hermes.sessions.search";
pub const SESSIONS_LIST: &str = "hermes.sessions.list";
pub const SESSIONS_SHOW: &str = "hermes.sessions.show";
pub const TOOLS_LIST: &str = "hermes.tools.list";
pub const TOOLS_METRICS: &str = "hermes.tools.metrics";
/// Stop a job whose turn no longer waits for it (served by the tool-executor).
pub const JOBS_CANCEL: &str = "hermes.jobs.cancel";
/// The tool-executor's catalog changed (MCP tools mounted or unmounted).
pub const TOOLS_CHANGED: &str = "hermes.tools.changed";
pub const MCP_CALL: &str = "hermes.mcp.call";
pub const MCP_CATALOG: &str = "hermes.mcp.catalog";
pub const MCP_READ: &str = "hermes.mcp.read";
pub const MCP_PROMPT: &str = "hermes.mcp.prompt";
/// Follow or cancel a task a mounted MCP server runs (tasks extension).
pub const MCP_TASK: &str = "hermes.mcp.task";
pub const MCP_AUDIT: &str = "hermes.mcp.audit";
pub const MCP_CHANGED: &str = "hermes.mcp.changed";
pub const MEMORY_LIST: &str = "hermes.memory.list";
pub const MEMORY_RECALL: &str = "hermes.memory.recall";
pub const MEMORY_WRITE: &str = "hermes.memory.write";
pub const MEMORY_FORGET: &str = "hermes.memory.forget";
pub const MEMORY_EXTRACT: &str = "hermes.memory.extract";
/// Every process answers a status request here (not a queue group: all of them answer).
pub const STATUS: &str = "hermes.status";
/// `hermes backup` asks the serve holding a data directory, through its control socket.
pub const BACKUP: &str = "hermes.backup";

/// The `<kind>` of `hermes.audit.<kind>` subjects.
pub mod audit_kinds {
    /// A `tools/call` or `resources/read` the MCP-bridge made to a mounted server.
    pub const MCP: &str = "mcp";
    /// A call Hermes' own MCP server answered.
    pub const MCP_SERVER: &str = "mcp_server";
    /// A request Hermes' MCP server refused (no or bad token, tool or data not allowed).
    pub const AUTH_DENIED: &str = "auth_denied";
    /// A malformed, oversized or mis-addressed inbound message.
    pub const BAD_INPUT: &str = "bad_input";
    /// An inbound message its publisher may not send: a user it may not speak for, a field
    /// only Hermes' services set, or no publisher named where users are bound to publishers.
    pub const BUS_DENIED: &str = "bus_denied";
}

/// Longest id accepted in a subject token.
pub const MAX_ID_LEN: usize = 128;

/// Why an id cannot go into a subject.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} id `{value}`: {reason} (use 1–128 characters from A–Z a–z 0–9 _ -)")]
pub struct IdError {
    pub what: &'static str,
    pub value: String,
    pub reason: &'static str,
}

/// The bytes an id may have: ASCII letters and digits, `_` and `-` (a table: ids are checked
/// on every envelope, several times a turn).
const ID_BYTE: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric() || c == b'_' || c == b'-';
        b += 1;
    }
    table
};

/// Check that `value` is safe as one subject token: no dots, wildcards, spaces or control chars.
pub fn check_id(what: &'static str, value: &str) -> Result<(), IdError> {
    let fail = |reason| IdError {
        what,
        value: value.chars().take(80).collect(),
        reason,
    };
    if value.is_empty() {
        return Err(fail("it is empty"));
    }
    if value.len() > MAX_ID_LEN {
        return Err(fail("it is longer than 128 characters"));
    }
    // Bytes, not chars: every allowed character is ASCII, and a byte of a multi-byte
    // character is never one of them.
    if !value.bytes().all(|b| ID_BYTE[usize::from(b)]) {
        return Err(fail("it contains a character that is not allowed"));
    }
    Ok(())
}

/// `hermes.in.<agent>.<session>`
pub fn inbound(agent: &str, session: &str) -> Result<String, IdError> {
    check_id("agent", agent)?;
    check_id("session", session)?;
    Ok(format!("hermes.in.{agent}.{session}"))
}

/// `hermes.in.<agent>.<session>`, or `hermes.in.<agent>.<session>.<publisher>` when the
/// sender has an identity on the bus (a server with permissions lets only that identity
/// publish there, so the subject says who sent the message).
pub fn inbound_from(
    agent: &str,
    session: &str,
    publisher: Option<&str>,
) -> Result<String, IdError> {
    let subject = inbound(agent, session)?;
    match publisher {
        None => Ok(subject),
        Some(publisher) => {
            check_id("publisher", publisher)?;
            Ok(format!("{subject}.{publisher}"))
        }
    }
}

/// Where an inbound message was sent: its session, and the publisher the subject names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboundAddress {
    pub agent: String,
    pub session: String,
    /// The last token of `hermes.in.<agent>.<session>.<publisher>`; none for the short form.
    pub publisher: Option<String>,
}

/// Split `hermes.in.<agent>.<session>[.<publisher>]`, checking every token.
pub fn parse_inbound_address(subject: &str) -> Result<InboundAddress, IdError> {
    let not_inbound = |reason| IdError {
        what: "inbound subject",
        value: subject.chars().take(80).collect(),
        reason,
    };
    let rest = subject
        .strip_prefix("hermes.in.")
        .ok_or(not_inbound("it does not start with `hermes.in.`"))?;
    let mut tokens = rest.split('.');
    let (Some(agent), Some(session), publisher, None) =
        (tokens.next(), tokens.next(), tokens.next(), tokens.next())
    else {
        return Err(not_inbound(
            "it is not `hermes.in.<agent>.<session>` or `hermes.in.<agent>.<session>.<publisher>`",
        ));
    };
    check_id("agent", agent)?;
    check_id("session", session)?;
    if let Some(publisher) = publisher {
        check_id("publisher", publisher)?;
    }
    Ok(InboundAddress {
        agent: agent.to_string(),
        session: session.to_string(),
        publisher: publisher.map(str::to_string),
    })
}

/// The `<reader>` of the events of a message that named no user (a refused envelope).
pub const NO_READER: &str = "_";

/// `hermes.out.<agent>.<session>.<reader>`: the session's events, for `reader` — the one NATS
/// identity (besides Hermes' own services and operators) a server like
/// config/nats/hermes.conf lets read them.
pub fn outbound(agent: &str, session: &str, reader: &str) -> Result<String, IdError> {
    check_id("agent", agent)?;
    check_id("session", session)?;
    check_id("reader", reader)?;
    Ok(format!("hermes.out.{agent}.{session}.{reader}"))
}

/// `hermes.out.<agent>.<session>.*`: the session's events whoever reads them (for Hermes'
/// own services and operators, whose permissions allow `hermes.out.>`).
pub fn outbound_any_reader(agent: &str, session: &str) -> Result<String, IdError> {
    check_id("agent", agent)?;
    check_id("session", session)?;
    Ok(format!("hermes.out.{agent}.{session}.*"))
}

/// Where a turn event was published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundAddress {
    pub agent: String,
    pub session: String,
    pub reader: String,
}

/// Split `hermes.out.<agent>.<session>.<reader>`, checking every token.
pub fn parse_outbound(subject: &str) -> Result<OutboundAddress, IdError> {
    let not_outbound = |reason| IdError {
        what: "outbound subject",
        value: subject.chars().take(80).collect(),
        reason,
    };
    let rest = subject
        .strip_prefix("hermes.out.")
        .ok_or(not_outbound("it does not start with `hermes.out.`"))?;
    let mut tokens = rest.split('.');
    let (Some(agent), Some(session), Some(reader), None) =
        (tokens.next(), tokens.next(), tokens.next(), tokens.next())
    else {
        return Err(not_outbound(
            "it is not `hermes.out.<agent>.<session>.<reader>`",
        ));
    };
    check_id("agent", agent)?;
    check_id("session", session)?;
    check_id("reader", reader)?;
    Ok(OutboundAddress {
        agent: agent.to_string(),
        session: session.to_string(),
        reader: reader.to_string(),
    })
}

/// `hermes.tool.<name>`
pub fn tool(name: &str) -> Result<String, IdError> {
    check_id("tool", name)?;
    Ok(format!("hermes.tool.{name}"))
}

/// `hermes.job.<id>`
pub fn job(id: &str) -> Result<String, IdError> {
    check_id("job", id)?;
    Ok(format!("hermes.job.{id}"))
}

/// `hermes.audit.<kind>`
pub fn audit(kind: &str) -> Result<String, IdError> {
    check_id("audit kind", kind)?;
    Ok(format!("hermes.audit.{kind}"))
}

/// Split `hermes.in.<agent>.<session>` into its agent and session, checking both.
pub fn parse_inbound(subject: &str) -> Result<(String, String), IdError> {
    let rest = subject.strip_prefix("hermes.in.").ok_or(IdError {
        what: "inbound subject",
        value: subject.chars().take(80).collect(),
        reason: "it does not start with `hermes.in.`",
    })?;
    let (agent, session) = rest.split_once('.').ok_or(IdError {
        what: "inbound subject",
        value: subject.chars().take(80).collect(),
        reason: "it is not `hermes.in.<agent>.<session>`",
    })?;
    check_id("agent", agent)?;
    check_id("session", session)?;
    Ok((agent.to_string(), session.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_with_dots_wildcards_or_spaces_are_rejected() {
        for bad in ["a.b", "a*", "a>", "a b", "", "é"] {
            assert!(check_id("session", bad).is_err(), "{bad:?} accepted");
        }
        assert!(check_id("session", &"x".repeat(129)).is_err());
        assert!(check_id("session", "s-1_A").is_ok());
        for c in (0u32..0x3100).filter_map(char::from_u32) {
            let allowed = c.is_ascii_alphanumeric() || c == '_' || c == '-';
            assert_eq!(
                check_id("session", &format!("a{c}b")).is_ok(),
                allowed,
                "{c:?}"
            );
        }
    }

    #[test]
    fn inbound_subject_round_trips() {
        let s = inbound("shop", "s1").unwrap();
        assert_eq!(s, "hermes.in.shop.s1");
        assert_eq!(parse_inbound(&s).unwrap(), ("shop".into(), "s1".into()));
        assert!(parse_inbound("hermes.in.shop.s1.extra").is_err());
        assert!(parse_inbound("hermes.out.shop.s1").is_err());
    }

    #[test]
    fn an_inbound_subject_may_name_its_publisher() {
        let s = inbound_from("shop", "s1", Some("web-gw")).unwrap();
        assert_eq!(s, "hermes.in.shop.s1.web-gw");
        let address = parse_inbound_address(&s).unwrap();
        assert_eq!(address.publisher.as_deref(), Some("web-gw"));
        assert_eq!(
            (address.agent.as_str(), address.session.as_str()),
            ("shop", "s1")
        );
        let short = parse_inbound_address("hermes.in.shop.s1").unwrap();
        assert_eq!(short.publisher, None);
        assert_eq!(
            inbound_from("shop", "s1", None).unwrap(),
            "hermes.in.shop.s1"
        );
        assert!(parse_inbound_address("hermes.in.shop.s1.p.extra").is_err());
        assert!(parse_inbound_address("hermes.in.shop").is_err());
        assert!(parse_inbound_address("hermes.in.shop.s1.*").is_err());
        assert!(inbound_from("shop", "s1", Some("a.b")).is_err());
    }

    #[test]
    fn an_outbound_subject_names_its_reader_and_round_trips() {
        let s = outbound("shop", "s1", "alice").unwrap();
        assert_eq!(s, "hermes.out.shop.s1.alice");
        let address = parse_outbound(&s).unwrap();
        assert_eq!(
            (
                address.agent.as_str(),
                address.session.as_str(),
                address.reader.as_str()
            ),
            ("shop", "s1", "alice")
        );
        assert!(outbound("shop", "s1", "*").is_err());
        assert!(outbound("shop", "s1", "a.b").is_err());
        assert!(parse_outbound("hermes.out.shop.s1").is_err());
        assert!(parse_outbound("hermes.out.shop.s1.alice.x").is_err());
        assert_eq!(
            outbound_any_reader("shop", "s1").unwrap(),
            "hermes.out.shop.s1.*"
        );
    }
}
