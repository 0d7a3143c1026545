//! Reading an [`Envelope`] without buffering it.
//!
//! A derived `#[serde(flatten)]` reads the whole envelope into serde's generic `Content` tree
//! before building the payload from it: every string copied twice, every map allocated twice.
//! Resuming a long session reads every envelope of its log, so that cost was most of the time
//! to the first request (issue 14's bench). This reads the fixed fields, then hands `kind` and
//! the still-unread `data` to the payload's own derived (adjacently tagged) deserializer, which
//! builds it straight from the input when the tag comes first — as corral always writes it.
//! A `data` read before its `kind` (another writer's order) is buffered as a JSON value.

use std::fmt;
use std::sync::Arc;

use serde::de::value::{MapAccessDeserializer, StrDeserializer};
use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::{Envelope, Payload, Timestamp};

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum Field {
    Seq,
    Ts,
    Agent,
    Turn,
    Kind,
    Data,
    #[serde(other)]
    Other,
}

impl<'de> Deserialize<'de> for Envelope {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(EnvelopeVisitor)
    }
}

struct EnvelopeVisitor;

impl<'de> Visitor<'de> for EnvelopeVisitor {
    type Value = Envelope;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an event envelope {seq, ts, agent, turn, kind, data}")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope, A::Error> {
        let mut seq = None;
        let mut ts = None;
        let mut agent: Option<Arc<str>> = None;
        let mut turn = None;
        let mut kind: Option<String> = None;
        let mut early_data: Option<Value> = None;
        let mut payload = None;
        while let Some(field) = map.next_key::<Field>()? {
            match field {
                Field::Seq => seq = Some(map.next_value()?),
                Field::Ts => ts = Some(map.next_value::<Timestamp>()?),
                Field::Agent => agent = Some(map.next_value::<Arc<str>>()?),
                Field::Turn => turn = Some(map.next_value()?),
                Field::Kind => {
                    if kind.is_some() {
                        return Err(de::Error::duplicate_field("kind"));
                    }
                    kind = Some(map.next_value::<String>()?);
                }
                Field::Data => {
                    if payload.is_some() || early_data.is_some() {
                        return Err(de::Error::duplicate_field("data"));
                    }
                    match &kind {
                        Some(kind) => {
                            payload = Some(Payload::deserialize(MapAccessDeserializer::new(
                                PayloadAccess {
                                    kind,
                                    data: Some(&mut map),
                                    step: Step::KindKey,
                                },
                            ))?);
                        }
                        None => early_data = Some(map.next_value()?),
                    }
                }
                Field::Other => {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
        }
        let payload = match (payload, kind) {
            (Some(payload), _) => payload,
            (None, None) => return Err(de::Error::missing_field("kind")),
            (None, Some(kind)) => {
                let mut parts = serde_json::Map::new();
                parts.insert("kind".into(), Value::String(kind));
                if let Some(data) = early_data {
                    parts.insert("data".into(), data);
                }
                Payload::deserialize(Value::Object(parts)).map_err(de::Error::custom)?
            }
        };
        Ok(Envelope {
            seq: seq.ok_or_else(|| de::Error::missing_field("seq"))?,
            ts: ts.ok_or_else(|| de::Error::missing_field("ts"))?,
            session: agent.ok_or_else(|| de::Error::missing_field("agent"))?,
            turn: turn.ok_or_else(|| de::Error::missing_field("turn"))?,
            payload,
        })
    }
}

#[derive(Clone, Copy)]
enum Step {
    KindKey,
    KindValue,
    DataKey,
    DataValue,
    Done,
}

/// The map `{"kind": …, "data": …}` the payload's derived deserializer expects: `kind` already
/// read, `data` the envelope's next value, read in place.
struct PayloadAccess<'a, A> {
    kind: &'a str,
    data: Option<&'a mut A>,
    step: Step,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for PayloadAccess<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        let key = match self.step {
            Step::KindKey => {
                self.step = Step::KindValue;
                "kind"
            }
            Step::DataKey => {
                self.step = Step::DataValue;
                "data"
            }
            _ => return Ok(None),
        };
        let key: StrDeserializer<'_, A::Error> = key.into_deserializer();
        seed.deserialize(key).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        match self.step {
            Step::KindValue => {
                self.step = Step::DataKey;
                let kind: StrDeserializer<'_, A::Error> = self.kind.into_deserializer();
                seed.deserialize(kind)
            }
            Step::DataValue => {
                self.step = Step::Done;
                match self.data.take() {
                    Some(map) => map.next_value_seed(seed),
                    None => Err(de::Error::custom("envelope data read twice")),
                }
            }
            _ => Err(de::Error::custom("envelope payload: value without a key")),
        }
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(TimestampVisitor)
    }
}

struct TimestampVisitor;

impl Visitor<'_> for TimestampVisitor {
    type Value = Timestamp;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an RFC 3339 timestamp")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Timestamp, E> {
        Timestamp::parse(text).map_err(E::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{ContentBlock, TextData};

    fn text_payload(text: &str) -> Payload {
        Payload::AssistantText(TextData {
            delta: false,
            content: ContentBlock::text(text),
        })
    }

    #[test]
    fn reads_fields_in_any_order_and_ignores_unknown_ones() {
        let written = r#"{"data":{"delta":false,"content":{"type":"text","text":"hi"}},"extra":[1,{"a":2}],"turn":3,"kind":"assistant_text","agent":"ab","ts":"2026-11-30T12:00:00.123Z","seq":7}"#;
        let envelope: Envelope = serde_json::from_str(written).unwrap();
        assert_eq!(envelope.seq, 7);
        assert_eq!(envelope.turn, 3);
        assert_eq!(&*envelope.session, "ab");
        assert_eq!(envelope.payload, text_payload("hi"));
    }

    #[test]
    fn reads_escaped_text_and_a_payload_from_a_json_value() {
        let value = serde_json::json!({"seq": 1, "ts": "2026-11-30T12:00:00Z", "agent": "a",
            "turn": 0, "kind": "assistant_text",
            "data": {"delta": false, "content": {"type": "text", "text": "a\"b\n"}}});
        let from_value = Envelope::deserialize(&value).unwrap();
        let from_text: Envelope = serde_json::from_str(&value.to_string()).unwrap();
        assert_eq!(from_value, from_text);
        assert_eq!(from_text.payload, text_payload("a\"b\n"));
    }

    #[test]
    fn refuses_what_is_not_an_envelope() {
        for bad in [
            r#"{"seq":1,"ts":"2026-11-30T12:00:00Z","agent":"a","turn":0}"#,
            r#"{"seq":1,"ts":"2026-11-30T12:00:00Z","agent":"a","turn":0,"kind":"nope","data":{}}"#,
            r#"{"seq":1,"ts":"yesterday","agent":"a","turn":0,"kind":"turn_started","data":{}}"#,
            r#"{"ts":"2026-11-30T12:00:00Z","agent":"a","turn":0,"kind":"turn_started","data":{}}"#,
            r#"{"seq":1,"ts":"2026-11-30T12:00:00Z","agent":"a","turn":0,"kind":"turn_started","kind":"turn_started","data":{}}"#,
            r#"{"seq":1,"ts":"2026-11-30T12:00:00Z","agent":"a","turn":0,"kind":"status","data":{"status":5}}"#,
            r#"[1,2]"#,
        ] {
            assert!(serde_json::from_str::<Envelope>(bad).is_err(), "{bad}");
        }
    }
}
