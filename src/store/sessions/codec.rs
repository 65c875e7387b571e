//! How session records are written to and read from bytes: JSON, a session's record (its
//! metadata and task state in one value) and a log record put together from borrowed parts so
//! a save encodes its task once.

use serde::{Deserialize, Serialize};

use super::{SessionMeta, StoreError, StoredMessage};
use crate::store::tasks::TaskState;

/// How a session's record begins since the task state moved into it: `{"meta":…,"task":…}`.
/// A record without it is the metadata alone, as earlier versions wrote it (their task state
/// is in the `tasks` tree).
const RECORD_FIRST: &[u8] = br#"{"meta":"#;

pub(super) fn decode<T: for<'de> Deserialize<'de>>(
    what: &str,
    bytes: &[u8],
) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        what: what.to_string(),
        reason: e.to_string(),
    })
}

pub(super) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(value).map_err(|e| StoreError::Encode(e.to_string()))
}

/// A session's record: its metadata and its task state (already encoded), one value, so a
/// save writes one record besides its messages.
pub(super) fn encode_session(meta: &SessionMeta, task_json: &[u8]) -> Result<Vec<u8>, StoreError> {
    let mut out = Vec::with_capacity(320 + task_json.len());
    out.extend_from_slice(RECORD_FIRST);
    serde_json::to_writer(&mut out, meta).map_err(|e| StoreError::Encode(e.to_string()))?;
    out.extend_from_slice(b",\"task\":");
    out.extend_from_slice(task_json);
    out.push(b'}');
    Ok(out)
}

/// A session's record: its metadata, and its task state unless the record is an earlier
/// version's (the metadata alone).
pub(super) fn decode_session(bytes: &[u8]) -> Result<(SessionMeta, Option<TaskState>), StoreError> {
    #[derive(Deserialize)]
    struct Whole {
        meta: SessionMeta,
        task: TaskState,
    }
    if bytes.starts_with(RECORD_FIRST) {
        let whole: Whole = decode("session record", bytes)?;
        return Ok((whole.meta, Some(whole.task)));
    }
    Ok((decode("session meta", bytes)?, None))
}

/// The metadata of a session's record, its task state passed over.
pub(super) fn decode_session_meta(bytes: &[u8]) -> Result<SessionMeta, StoreError> {
    #[derive(Deserialize)]
    struct Head {
        meta: SessionMeta,
    }
    if bytes.starts_with(RECORD_FIRST) {
        return Ok(decode::<Head>("session record", bytes)?.meta);
    }
    decode("session meta", bytes)
}

/// Messages one record of the `messages` tree holds at most.
pub(super) const BATCH_MAX: usize = 64;

/// One record of the `messages` tree for messages a save stores together (already encoded,
/// in order): the message itself when it is alone, as earlier versions wrote every message,
/// else a JSON array of them — one write where there were as many as messages.
pub(super) fn encode_batch(listed: &[Vec<u8>]) -> Vec<u8> {
    if let [one] = listed {
        return one.clone();
    }
    let mut out = Vec::with_capacity(listed.iter().map(|m| m.len() + 1).sum::<usize>() + 1);
    out.push(b'[');
    join(&mut out, listed);
    out.push(b']');
    out
}

/// `listed` (encoded JSON values) written to `out` one after another, separated by commas.
fn join(out: &mut Vec<u8>, listed: &[Vec<u8>]) {
    for (i, value) in listed.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(value);
    }
}

/// The messages of one record of the `messages` tree (one message, or an array of them),
/// appended to `out`.
pub(super) fn decode_batch(bytes: &[u8], out: &mut Vec<StoredMessage>) -> Result<(), StoreError> {
    if bytes.first() == Some(&b'[') {
        out.extend(decode::<Vec<StoredMessage>>("messages", bytes)?);
    } else {
        out.push(decode("message", bytes)?);
    }
    Ok(())
}

/// A [`LogRecord`] as `serde_json` writes it, from borrowed parts, the messages and the task
/// (and the extraction job it carries, if any) already encoded: a save neither clones them into
/// a record nor encodes them twice (once for the log, once for the local cache).
pub(super) fn encode_record(
    meta: &SessionMeta,
    messages_json: &[Vec<u8>],
    task_json: &[u8],
    extract_json: Option<&[u8]>,
) -> Result<Vec<u8>, StoreError> {
    let extra = extract_json.map_or(0, <[u8]>::len);
    let listed: usize = messages_json.iter().map(|m| m.len() + 1).sum();
    let mut out = Vec::with_capacity(320 + listed + task_json.len() + extra);
    // The job first: its readers stop after it (`carried_job`).
    match extract_json {
        Some(job) => {
            out.extend_from_slice(b"{\"extract\":");
            out.extend_from_slice(job);
            out.extend_from_slice(b",\"meta\":");
        }
        None => out.extend_from_slice(b"{\"meta\":"),
    }
    serde_json::to_writer(&mut out, meta).map_err(|e| StoreError::Encode(e.to_string()))?;
    out.extend_from_slice(b",\"messages\":[");
    join(&mut out, messages_json);
    out.extend_from_slice(b"],\"task\":");
    out.extend_from_slice(task_json);
    out.push(b'}');
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use crate::store::replica::{carried_job, LogRecord};
    use crate::store::sessions::tests::msg;
    use crate::store::tasks::TaskState;

    #[test]
    fn a_batch_of_messages_reads_back_in_order_and_a_lone_message_is_written_as_before() {
        let messages = [msg(3, "one"), msg(4, "two [x]"), msg(5, "three")];
        let listed: Vec<Vec<u8>> = messages.iter().map(|m| encode(m).unwrap()).collect();
        let mut got = Vec::new();
        decode_batch(&encode_batch(&listed), &mut got).unwrap();
        decode_batch(&encode_batch(&listed[..1]), &mut got).unwrap();
        assert_eq!(got.len(), 4);
        assert_eq!(got[..3], messages);
        assert_eq!(got[3], messages[0]);
        assert_eq!(encode_batch(&listed[..1]), listed[0]);
        assert!(decode_batch(b"[{\"seq\":1", &mut got).is_err());
    }

    #[test]
    fn a_session_record_reads_back_whole_and_an_earlier_versions_metadata_alone() {
        let meta = SessionMeta::new("assistant", "s1", "alice");
        let task = TaskState {
            goal: Some("book a \"table\"".into()),
            summary_upto: 4,
            ..TaskState::default()
        };
        let record = encode_session(&meta, &encode(&task).unwrap()).unwrap();
        assert_eq!(decode_session(&record).unwrap(), (meta.clone(), Some(task)));
        assert_eq!(decode_session_meta(&record).unwrap(), meta);
        let earlier = encode(&meta).unwrap();
        assert_eq!(decode_session(&earlier).unwrap(), (meta.clone(), None));
        assert_eq!(decode_session_meta(&earlier).unwrap(), meta);
        assert!(matches!(
            decode_session(&record[..record.len() - 1]),
            Err(StoreError::Corrupt { .. })
        ));
    }

    #[test]
    fn a_log_record_encoded_from_parts_is_byte_for_byte_what_serde_writes() {
        let meta = SessionMeta::new("assistant", "s1", "alice");
        let messages = vec![msg(0, "hello \"you\""), msg(1, "ünïcode ✓")];
        let task = TaskState {
            goal: Some("find the \\ path".into()),
            ..TaskState::default()
        };
        let whole = serde_json::to_vec(&LogRecord {
            meta: meta.clone(),
            messages: messages.clone(),
            task: task.clone(),
            extract: None,
        })
        .unwrap();
        let listed: Vec<Vec<u8>> = messages.iter().map(|m| encode(m).unwrap()).collect();
        let parts = encode_record(&meta, &listed, &encode(&task).unwrap(), None).unwrap();
        assert_eq!(
            String::from_utf8(parts).unwrap(),
            String::from_utf8(whole).unwrap()
        );
    }

    #[test]
    fn a_log_record_carrying_an_extraction_job_reads_back_with_the_job_verbatim() {
        let meta = SessionMeta::new("assistant", "s1", "alice");
        let job = br#"{"v":1,"kind":"memory.extract","body":{"turn_id":"t1"}}"#;
        let parts = encode_record(
            &meta,
            &[],
            &encode(&TaskState::default()).unwrap(),
            Some(job),
        )
        .unwrap();
        let record: LogRecord = serde_json::from_slice(&parts).unwrap();
        assert_eq!(record.extract.unwrap().get().as_bytes(), job);
        let whole = serde_json::to_vec(&LogRecord {
            meta,
            messages: Vec::new(),
            task: TaskState::default(),
            extract: Some(
                serde_json::value::RawValue::from_string(String::from_utf8(job.to_vec()).unwrap())
                    .unwrap(),
            ),
        })
        .unwrap();
        assert_eq!(whole, parts);
        assert_eq!(carried_job(&parts).unwrap().unwrap().get().as_bytes(), job);
    }

    #[test]
    fn the_carried_job_is_found_first_last_or_not_at_all() {
        let meta = SessionMeta::new("assistant", "s1", "alice");
        let task = encode(&TaskState::default()).unwrap();
        // A message whose content is a JSON object with an `extract` key of its own.
        let mut quoting = msg(0, "see below");
        Arc::make_mut(&mut quoting.message).tool_calls = vec![crate::llm::ToolCall {
            id: "c1".into(),
            name: "note".into(),
            arguments: serde_json::json!({"extract": {"kind": "not a job"}}),
        }];
        let listed = [encode(&quoting).unwrap()];
        let plain = encode_record(&meta, &listed, &task, None).unwrap();
        assert!(carried_job(&plain).unwrap().is_none());
        let job = br#"{"v":1,"kind":"memory.extract","body":{"turn_id":"t1"}}"#;
        let first = encode_record(&meta, &listed, &task, Some(job)).unwrap();
        assert_eq!(carried_job(&first).unwrap().unwrap().get().as_bytes(), job);
        // As an older version wrote it: the job last.
        let mut last = plain.clone();
        last.pop();
        last.extend_from_slice(b",\"extract\":");
        last.extend_from_slice(job);
        last.push(b'}');
        assert_eq!(carried_job(&last).unwrap().unwrap().get().as_bytes(), job);
        assert!(carried_job(br#"{"extract":{"cut"#).is_err());
    }
}
