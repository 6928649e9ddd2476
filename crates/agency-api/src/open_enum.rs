//! Kind fields the store keeps as text (an outcome event's action, a
//! memory change): a closed set of known values plus the text of any
//! other. A value written by another version of Agency (or by hand) thus
//! reads back and goes out unchanged, where a closed enum would fail the
//! whole answer or drop the row.

/// Declares such an enum: its known variants with their wire names, and
/// `Other(String)` for anything else. It (de)serializes as the plain
/// string, converts from the store's text without loss (`From<String>`),
/// shows as that text (`Display`) and compares with `&str`.
///
/// Build values with `From` (or the known variants), never
/// `Other("a known name")`: that value would not equal its variant.
macro_rules! open_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A value this version does not know, kept as written.
            Other(String),
        }

        impl $name {
            /// Every known value.
            pub const KNOWN: &'static [$name] = &[$($name::$variant),+];

            /// The value as written on the wire and in the store.
            pub fn as_str(&self) -> &str {
                match self {
                    $( $name::$variant => $text, )+
                    $name::Other(s) => s,
                }
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                match s {
                    $( $text => $name::$variant, )+
                    other => $name::Other(other.to_owned()),
                }
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                match $name::from(s.as_str()) {
                    $name::Other(_) => $name::Other(s),
                    known => known,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                <String as serde::Deserialize>::deserialize(d).map($name::from)
            }
        }
    };
}

pub(crate) use open_enum;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::{MemoryChangeKind, OutcomeAction};

    /// Each known value goes out as `text`, reads back as itself from the
    /// wire and from the store's text, and compares equal to the text.
    fn round_trips<T>(known: &[T], texts: &[&str])
    where
        T: std::fmt::Debug
            + Clone
            + PartialEq
            + for<'a> PartialEq<&'a str>
            + From<String>
            + serde::Serialize
            + serde::de::DeserializeOwned,
    {
        assert_eq!(known.len(), texts.len(), "{known:?}");
        for (v, text) in known.iter().zip(texts) {
            let json = serde_json::to_value(v).unwrap();
            assert_eq!(json, serde_json::json!(text), "{v:?}");
            assert_eq!(serde_json::from_value::<T>(json).unwrap(), *v);
            assert_eq!(T::from((*text).to_owned()), *v);
            assert!(*v == *text, "{v:?}");
        }
    }

    #[test]
    fn outcome_actions_keep_their_names() {
        round_trips(
            OutcomeAction::KNOWN,
            &[
                "created",
                "system:created",
                "updated",
                "completion_requested",
                "completed",
                "closed",
                "reopened",
                "delegated",
                "reclaimed",
                "moved",
            ],
        );
        assert_eq!(OutcomeAction::Moved.to_string(), "moved");
    }

    #[test]
    fn memory_changes_keep_their_names() {
        round_trips(
            MemoryChangeKind::KNOWN,
            &["stored", "live", "forgotten", "condensed"],
        );
    }

    #[test]
    fn unknown_values_are_kept_as_written() {
        let a = OutcomeAction::from("archived by v9".to_owned());
        assert_eq!(a, OutcomeAction::Other("archived by v9".into()));
        assert_eq!(a.as_str(), "archived by v9");
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(json, r#""archived by v9""#);
        assert_eq!(serde_json::from_str::<OutcomeAction>(&json).unwrap(), a);

        let c = MemoryChangeKind::from("pinned");
        assert_eq!(c.to_string(), "pinned");
        let back: MemoryChangeKind =
            serde_json::from_value(serde_json::to_value(&c).unwrap()).unwrap();
        assert_eq!(back, MemoryChangeKind::Other("pinned".into()));
    }

    #[test]
    fn a_flattened_event_reads_back() {
        // `HistoryEvent` flattens the event: the action goes through
        // serde's buffered content there.
        let e = crate::HistoryEvent {
            seq: 3,
            event: crate::OutcomeEvent {
                outcome: agency_core::OutcomeId(uuid::Uuid::from_u128(1)),
                at: agency_core::Timestamp(5),
                handler: None,
                agent: None,
                action: OutcomeAction::SystemCreated,
                detail: "bootstrap".into(),
            },
        };
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(json["action"], "system:created");
        assert_eq!(
            serde_json::from_value::<crate::HistoryEvent>(json).unwrap(),
            e
        );
    }
}
