//! Subscriptions on the wire, in jsonrpsee's shape: the id a subscribe call returns, the
//! params of the unsubscribe call, and the params of the notifications that carry a
//! subscription's items (docs/protocol.md, "Subscriptions and replay").

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What a subscribe call returns. Opaque: jsonrpsee issues numbers or strings.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SubscriptionId {
    Number(u64),
    String(String),
}

/// Params of an unsubscribe call. Sent positionally (`[id]`); the named form
/// (`{"subscription": id}`) is read too.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UnsubscribeParams {
    pub subscription: SubscriptionId,
}

impl Serialize for UnsubscribeParams {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        [&self.subscription].serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for UnsubscribeParams {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Positional([SubscriptionId; 1]),
            Named { subscription: SubscriptionId },
        }
        let subscription = match Either::deserialize(deserializer)? {
            Either::Positional([subscription]) | Either::Named { subscription } => subscription,
        };
        Ok(UnsubscribeParams { subscription })
    }
}

/// `params` of a subscription's notification: the subscription it belongs to and either
/// one item (`result`) or the error that ended it (`error`, its last notification).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubscriptionParams<T> {
    pub subscription: SubscriptionId,
    #[serde(flatten)]
    pub payload: SubscriptionPayload<T>,
}

/// What one notification of a subscription carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubscriptionPayload<T> {
    Result(T),
    Error(SubscriptionClosed),
}

/// Why the daemon ended a subscription; resubscribing with `afterSeq` = `lastSeq` loses
/// nothing durable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionClosed {
    pub code: CloseCode,
    /// The newest durable seq delivered on the subscription.
    pub last_seq: u64,
    pub message: String,
}

/// The machine-readable reason in [`SubscriptionClosed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CloseCode {
    /// The subscriber fell more than `[server] subscriber_buffer` events behind.
    Lagged,
    /// The session was deleted or the daemon is stopping (after the session's last event).
    SessionClosed,
}
