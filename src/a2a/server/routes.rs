//! Paths → what they ask for. Every agent has one base URL, `/a2a/<agent>`: a `POST` of the
//! base itself is a JSON-RPC call; the HTTP+JSON routes hang below it (`/message:send`,
//! `/tasks/{id}:cancel`, …), as the A2A spec's method mapping names them.

use hyper::Method;

/// An HTTP+JSON operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestOp {
    Send,
    Stream,
    GetTask(String),
    ListTasks,
    Cancel(String),
    Subscribe(String),
    CreatePush(String),
    ListPush(String),
    GetPush(String, String),
    DeletePush(String, String),
    ExtendedCard,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Card {
        agent: String,
    },
    JsonRpc {
        agent: String,
    },
    Rest {
        agent: String,
        op: RestOp,
    },
    /// A known path with a method it does not take.
    NotAllowed {
        agent: String,
    },
    NotFound,
}

impl Route {
    /// The agent the path names.
    pub fn agent(&self) -> Option<&str> {
        match self {
            Route::Card { agent }
            | Route::JsonRpc { agent }
            | Route::Rest { agent, .. }
            | Route::NotAllowed { agent } => Some(agent),
            Route::NotFound => None,
        }
    }

    pub fn not_found_text(&self) -> String {
        match self {
            Route::NotAllowed { .. } => "this A2A path does not take that method: JSON-RPC is \
                a POST of /a2a/<agent>; the HTTP+JSON routes are those of the A2A 1.0 spec \
                (POST /a2a/<agent>/message:send, GET /a2a/<agent>/tasks/{id}, …)\n"
                .into(),
            _ => format!(
                "A2A agents are served at /a2a/<agent> (Agent Card at \
                 /a2a/<agent>{})\n",
                super::CARD_PATH
            ),
        }
    }
}

/// What `method path` asks for; `default_agent` answers the well-known card at the root.
pub fn route(method: &Method, path: &str, default_agent: Option<&str>) -> Route {
    if path == super::CARD_PATH {
        return match (default_agent, method) {
            (Some(agent), &Method::GET | &Method::HEAD) => Route::Card {
                agent: agent.into(),
            },
            (Some(agent), _) => Route::NotAllowed {
                agent: agent.into(),
            },
            (None, _) => Route::NotFound,
        };
    }
    let Some(rest) = path.strip_prefix(super::PREFIX) else {
        return Route::NotFound;
    };
    let (agent, tail) = match rest.split_once('/') {
        Some((agent, tail)) => (agent, format!("/{tail}")),
        None => (rest, String::new()),
    };
    if agent.is_empty() {
        return Route::NotFound;
    }
    let agent = agent.to_owned();
    let not_allowed = || Route::NotAllowed {
        agent: agent.clone(),
    };
    match tail.as_str() {
        "" | "/" => {
            return if method == Method::POST {
                Route::JsonRpc { agent }
            } else {
                not_allowed()
            }
        }
        t if t == super::CARD_PATH => {
            return match *method {
                Method::GET | Method::HEAD => Route::Card { agent },
                _ => not_allowed(),
            }
        }
        _ => {}
    }
    match rest_op(method, &tail) {
        Some(Ok(op)) => Route::Rest { agent, op },
        Some(Err(())) => not_allowed(),
        None => Route::NotFound,
    }
}

/// The HTTP+JSON operation of `method tail`: none for an unknown path, `Err` for a known
/// path with the wrong method.
fn rest_op(method: &Method, tail: &str) -> Option<Result<RestOp, ()>> {
    let only = |m: Method, op: RestOp| Some(if *method == m { Ok(op) } else { Err(()) });
    match tail {
        "/message:send" => return only(Method::POST, RestOp::Send),
        "/message:stream" => return only(Method::POST, RestOp::Stream),
        "/tasks" => return only(Method::GET, RestOp::ListTasks),
        "/extendedAgentCard" => return only(Method::GET, RestOp::ExtendedCard),
        _ => {}
    }
    let task_path = tail.strip_prefix("/tasks/")?;
    let segments: Vec<&str> = task_path.split('/').collect();
    match segments.as_slice() {
        [one] => {
            if let Some(id) = one.strip_suffix(":cancel") {
                return only(Method::POST, RestOp::Cancel(id.into()));
            }
            if let Some(id) = one.strip_suffix(":subscribe") {
                // The spec's table says POST, its .proto GET: both are taken.
                return match *method {
                    Method::POST | Method::GET => Some(Ok(RestOp::Subscribe(id.into()))),
                    _ => Some(Err(())),
                };
            }
            only(Method::GET, RestOp::GetTask((*one).into()))
        }
        [id, "pushNotificationConfigs"] => match *method {
            Method::POST => Some(Ok(RestOp::CreatePush((*id).into()))),
            Method::GET => Some(Ok(RestOp::ListPush((*id).into()))),
            _ => Some(Err(())),
        },
        [id, "pushNotificationConfigs", config] => match *method {
            Method::GET => Some(Ok(RestOp::GetPush((*id).into(), (*config).into()))),
            Method::DELETE => Some(Ok(RestOp::DeletePush((*id).into(), (*config).into()))),
            _ => Some(Err(())),
        },
        _ => None,
    }
}

/// The (percent-decoded) value of query parameter `name`.
pub fn query_param(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (percent_decode(key) == name).then(|| percent_decode(value))
    })
}

/// `a%3Ab+c` → `a:b c`; bytes that do not decode stay as they are.
pub fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rest(method: Method, path: &str) -> Route {
        route(&method, path, Some("assistant"))
    }

    #[test]
    fn each_binding_and_card_has_its_route_under_the_agents_base_url() {
        assert_eq!(
            rest(Method::GET, "/.well-known/agent-card.json"),
            Route::Card {
                agent: "assistant".into()
            }
        );
        assert_eq!(
            rest(Method::GET, "/a2a/care/.well-known/agent-card.json"),
            Route::Card {
                agent: "care".into()
            }
        );
        assert_eq!(
            rest(Method::POST, "/a2a/care"),
            Route::JsonRpc {
                agent: "care".into()
            }
        );
        let op = |method, path| match rest(method, path) {
            Route::Rest { op, .. } => Some(op),
            _ => None,
        };
        assert_eq!(op(Method::POST, "/a2a/x/message:send"), Some(RestOp::Send));
        assert_eq!(
            op(Method::POST, "/a2a/x/message:stream"),
            Some(RestOp::Stream)
        );
        assert_eq!(op(Method::GET, "/a2a/x/tasks"), Some(RestOp::ListTasks));
        assert_eq!(
            op(Method::GET, "/a2a/x/tasks/s.t"),
            Some(RestOp::GetTask("s.t".into()))
        );
        assert_eq!(
            op(Method::POST, "/a2a/x/tasks/s.t:cancel"),
            Some(RestOp::Cancel("s.t".into()))
        );
        assert_eq!(
            op(Method::POST, "/a2a/x/tasks/s.t:subscribe"),
            Some(RestOp::Subscribe("s.t".into()))
        );
        assert_eq!(
            op(
                Method::DELETE,
                "/a2a/x/tasks/s.t/pushNotificationConfigs/c1"
            ),
            Some(RestOp::DeletePush("s.t".into(), "c1".into()))
        );
        assert_eq!(
            rest(Method::DELETE, "/a2a/x/message:send"),
            Route::NotAllowed { agent: "x".into() }
        );
        assert_eq!(rest(Method::GET, "/a2a/x/nothing"), Route::NotFound);
    }

    #[test]
    fn query_values_are_percent_decoded() {
        let q = "statusTimestampAfter=2026-01-02T03%3A04%3A05Z&pageSize=2";
        assert_eq!(
            query_param(q, "statusTimestampAfter").as_deref(),
            Some("2026-01-02T03:04:05Z")
        );
        assert_eq!(query_param(q, "pageSize").as_deref(), Some("2"));
        assert_eq!(query_param(q, "missing"), None);
        assert_eq!(percent_decode("100%"), "100%");
    }
}
