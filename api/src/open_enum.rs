//! `open_enum!`: a string-valued enum with Volcano's spellings and a fallback for any other
//! string, for the fields Volcano types as `string` (actions, events, phases).
//!
//! Known spellings are variants to match on; anything else deserializes to `Other(s)` and
//! serializes back unchanged, so an object written by a newer Volcano (or by hand) always
//! decodes and round-trips. The JSON schema is a plain `string`: where Volcano's CRD lists
//! the allowed values, [`crate::crd`]'s CRD builders add the `enum` explicitly.

macro_rules! open_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $spelling:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )*
            /// A spelling Volcano does not define, kept as written.
            Other(String),
        }

        impl $name {
            /// Every spelling Volcano defines, in Volcano's order.
            pub const KNOWN: &'static [$name] = &[$( $name::$variant, )*];

            /// The value as written in the API.
            pub fn as_str(&self) -> &str {
                match self {
                    $( $name::$variant => $spelling, )*
                    $name::Other(s) => s,
                }
            }

            /// The variant for a spelling (`Other` when Volcano defines none).
            pub fn parse(s: &str) -> Self {
                match s {
                    $( $spelling => $name::$variant, )*
                    other => $name::Other(other.to_string()),
                }
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                $name::parse(s)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
                Ok($name::parse(&s))
            }
        }

        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn inline_schema() -> bool {
                true
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({ "type": "string" })
            }
        }
    };
}

pub(crate) use open_enum;
