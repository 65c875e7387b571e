//! Who is calling Hermes' MCP server and what they may do.
//!
//! A [`Principal`] is a user plus roles. Over HTTP it comes from a bearer token: the
//! [`TokenTable`] holds only sha256 digests (tokens read from environment variables are hashed
//! at start-up), so a token is never stored, compared in clear or logged. Over stdio the
//! principal is fixed by `hermes mcp serve --user`.
//!
//! Authorisation has two levels: **tools** (a role lists the tools it may call, by name or by
//! a pattern like `catalog__*`; `*` = all — an exposed agent is a tool named as the agent) and
//! **data** (a principal reads and writes only its own user's memories, unless one of its roles
//! grants a shared namespace, which it may then use for any user).

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

use crate::config::{McpHostConfig, McpRoleConfig};

/// The namespace memories go to when a caller names none.
pub use crate::memory::DEFAULT_NAMESPACE;

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub user: String,
    pub roles: Vec<String>,
    /// Tools it may call; `None` = every tool.
    tools: Option<BTreeSet<String>>,
    /// Shared namespaces it may use for any user.
    namespaces: BTreeSet<String>,
}

/// Why a request was refused (the text goes to the caller and the audit).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    #[error("no bearer token: send `Authorization: Bearer <token>` (tokens are configured in [[mcp.server.tokens]])")]
    NoToken,
    #[error("the bearer token is not valid; check the token you were given")]
    BadToken,
    #[error("principal `{user}` (roles: {roles}) may not call tool `{tool}`; a role in [mcp.server.roles] must list it")]
    Tool {
        user: String,
        roles: String,
        tool: String,
    },
    #[error("principal `{user}` may not use memories of user `{target}` in namespace `{namespace}`; only its own, or a shared namespace one of its roles grants")]
    Data {
        user: String,
        target: String,
        namespace: String,
    },
}

impl Principal {
    /// A principal with the tools and namespaces its roles grant (unknown roles grant nothing).
    pub fn with_roles(
        user: &str,
        roles: &[String],
        defined: &BTreeMap<String, McpRoleConfig>,
    ) -> Self {
        let mut tools = Some(BTreeSet::new());
        let mut namespaces = BTreeSet::new();
        for role in roles.iter().filter_map(|name| defined.get(name)) {
            for tool in &role.tools {
                if tool == "*" {
                    tools = None;
                } else if let Some(set) = tools.as_mut() {
                    set.insert(tool.clone());
                }
            }
            namespaces.extend(role.namespaces.iter().cloned());
        }
        Self {
            user: user.to_owned(),
            roles: roles.to_vec(),
            tools,
            namespaces,
        }
    }

    /// A local, trusted principal (stdio without roles): every tool, its own memories.
    pub fn trusted(user: &str) -> Self {
        Self {
            user: user.to_owned(),
            roles: Vec::new(),
            tools: None,
            namespaces: BTreeSet::new(),
        }
    }

    /// Whether a role lists `tool` (by name or by a pattern such as `catalog__*`).
    pub fn may_call(&self, tool: &str) -> bool {
        self.tools
            .as_ref()
            .is_none_or(|tools| tools.iter().any(|t| super::glob::matches(t, tool)))
    }

    /// Refuse a tool the principal's roles do not list.
    pub fn check_tool(&self, tool: &str) -> Result<(), Denied> {
        if self.may_call(tool) {
            Ok(())
        } else {
            Err(Denied::Tool {
                user: self.user.clone(),
                roles: if self.roles.is_empty() {
                    "none".into()
                } else {
                    self.roles.join(", ")
                },
                tool: tool.to_owned(),
            })
        }
    }

    /// May it use `target`'s memories in `namespace`? Its own always; others' only in a granted
    /// shared namespace.
    pub fn check_data(&self, target: &str, namespace: &str) -> Result<(), Denied> {
        if target == self.user || self.namespaces.contains(namespace) {
            Ok(())
        } else {
            Err(Denied::Data {
                user: self.user.clone(),
                target: target.to_owned(),
                namespace: namespace.to_owned(),
            })
        }
    }
}

/// sha256 digests of the configured tokens → their principals.
#[derive(Debug, Clone, Default)]
pub struct TokenTable {
    by_digest: BTreeMap<String, Principal>,
    anonymous: Option<Principal>,
}

/// A `[[mcp.server.tokens]]` entry whose secret cannot be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    #[error(
        "the MCP token of user `{user}` comes from the environment variable `{variable}`, which \
         is not set; export it or use token_sha256"
    )]
    UnsetVariable { user: String, variable: String },
    #[error(
        "the MCP token of user `{user}` has neither token_env nor token_sha256; set one of them"
    )]
    NoSecret { user: String },
}

impl TokenTable {
    /// Resolve `[[mcp.server.tokens]]` (reading `token_env` variables now) and the anonymous
    /// principal. A token variable that is unset is an error naming the variable.
    pub fn from_config(config: &McpHostConfig) -> Result<Self, TokenError> {
        let mut by_digest = BTreeMap::new();
        for token in &config.tokens {
            let digest = match (&token.token_sha256, &token.token_env) {
                (Some(hash), _) => hash.to_ascii_lowercase(),
                (None, Some(variable)) => {
                    let value = std::env::var(variable).map_err(|_| TokenError::UnsetVariable {
                        user: token.user.clone(),
                        variable: variable.clone(),
                    })?;
                    sha256_hex(&value)
                }
                (None, None) => {
                    return Err(TokenError::NoSecret {
                        user: token.user.clone(),
                    })
                }
            };
            by_digest.insert(
                digest,
                Principal::with_roles(&token.user, &token.roles, &config.roles),
            );
        }
        let anonymous = config
            .anonymous
            .as_ref()
            .map(|p| Principal::with_roles(&p.user, &p.roles, &config.roles));
        Ok(Self {
            by_digest,
            anonymous,
        })
    }

    /// The principal of an `Authorization` header value (or of its absence).
    pub fn authenticate(&self, authorization: Option<&str>) -> Result<Principal, Denied> {
        let Some(value) = authorization else {
            return self.anonymous.clone().ok_or(Denied::NoToken);
        };
        let token = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
            .ok_or(Denied::BadToken)?
            .trim();
        self.by_digest
            .get(&sha256_hex(token))
            .cloned()
            .ok_or(Denied::BadToken)
    }

    /// Whether any bearer token is configured.
    pub fn has_tokens(&self) -> bool {
        !self.by_digest.is_empty()
    }

    /// Whether requests without a token are served (as the anonymous principal).
    pub fn has_anonymous(&self) -> bool {
        self.anonymous.is_some()
    }

    /// Drop the anonymous principal (the listener is not on loopback).
    pub fn without_anonymous(mut self) -> Self {
        self.anonymous = None;
        self
    }
}

/// Lower-case hex sha256 of `text`.
pub fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{McpPrincipalConfig, McpTokenConfig};

    fn host() -> McpHostConfig {
        let mut roles = BTreeMap::new();
        roles.insert(
            "reader".to_owned(),
            McpRoleConfig {
                tools: vec!["memory_search".into()],
                namespaces: vec![],
            },
        );
        roles.insert(
            "team".to_owned(),
            McpRoleConfig {
                tools: vec!["*".into()],
                namespaces: vec!["shared".into()],
            },
        );
        McpHostConfig {
            tokens: vec![
                McpTokenConfig {
                    user: "alice".into(),
                    roles: vec!["reader".into()],
                    token_sha256: Some(sha256_hex("alice-token")),
                    ..Default::default()
                },
                McpTokenConfig {
                    user: "bot".into(),
                    roles: vec!["team".into()],
                    token_sha256: Some(sha256_hex("bot-token")),
                    ..Default::default()
                },
            ],
            roles,
            ..Default::default()
        }
    }

    #[test]
    fn sha256_matches_the_known_digest() {
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn tokens_map_to_principals_and_unknown_or_missing_tokens_are_refused() {
        let table = TokenTable::from_config(&host()).unwrap();
        let alice = table.authenticate(Some("Bearer alice-token")).unwrap();
        assert_eq!(alice.user, "alice");
        assert_eq!(
            table.authenticate(Some("Bearer nope")),
            Err(Denied::BadToken)
        );
        assert_eq!(table.authenticate(Some("Basic xyz")), Err(Denied::BadToken));
        assert_eq!(table.authenticate(None), Err(Denied::NoToken));
    }

    #[test]
    fn anonymous_principal_is_used_only_without_a_header_and_can_be_dropped() {
        let mut config = host();
        config.anonymous = Some(McpPrincipalConfig {
            user: "local".into(),
            roles: vec![],
        });
        let table = TokenTable::from_config(&config).unwrap();
        assert_eq!(table.authenticate(None).unwrap().user, "local");
        assert_eq!(
            table.authenticate(Some("Bearer nope")),
            Err(Denied::BadToken)
        );
        assert_eq!(
            table.without_anonymous().authenticate(None),
            Err(Denied::NoToken)
        );
    }

    #[test]
    fn roles_limit_tools_and_namespaces_grant_other_users_data() {
        let table = TokenTable::from_config(&host()).unwrap();
        let alice = table.authenticate(Some("Bearer alice-token")).unwrap();
        assert!(alice.check_tool("memory_search").is_ok());
        assert!(matches!(
            alice.check_tool("memory_write"),
            Err(Denied::Tool { .. })
        ));
        assert!(alice.check_data("alice", "default").is_ok());
        assert!(matches!(
            alice.check_data("bob", "default"),
            Err(Denied::Data { .. })
        ));
        let bot = table.authenticate(Some("Bearer bot-token")).unwrap();
        assert!(bot.check_tool("anything").is_ok());
        assert!(bot.check_data("bob", "shared").is_ok());
        assert!(bot.check_data("bob", "default").is_err());
    }

    #[test]
    fn token_from_an_unset_variable_is_an_error_naming_it() {
        let mut config = host();
        config.tokens[0].token_sha256 = None;
        config.tokens[0].token_env = Some("HERMES_TEST_UNSET_TOKEN_VARIABLE".into());
        let error = TokenTable::from_config(&config).unwrap_err();
        assert_eq!(
            error,
            TokenError::UnsetVariable {
                user: config.tokens[0].user.clone(),
                variable: "HERMES_TEST_UNSET_TOKEN_VARIABLE".into()
            }
        );
        assert!(error.to_string().contains("export it"), "{error}");
    }
}
