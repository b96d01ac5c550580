//! Enums stored in the profile file as their names. Each has one variant per
//! value fsprof writes and `Other` for a name this version does not know, so
//! a file from a later fsprof still reads and is written back unchanged:
//! typed in the code, the same strings in the file. One variant carries
//! `#[default]`.

/// `named! { /// doc  pub enum Name { /// doc  Variant = "name", ... } }`
macro_rules! named {
    (
        $(#[$m:meta])*
        pub enum $name:ident {
            $( $(#[$vm:meta])* $v:ident = $s:literal, )*
        }
    ) => {
        $(#[$m])*
        #[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
        #[serde(from = "String", into = "String")]
        pub enum $name {
            $( $(#[$vm])* $v, )*
            /// A name this version does not know, kept as it was.
            Other(String),
        }

        impl $name {
            /// The name in the file and in reports.
            pub fn name(&self) -> &str {
                match self {
                    $( $name::$v => $s, )*
                    $name::Other(s) => s,
                }
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                match s {
                    $( $s => $name::$v, )*
                    s => $name::Other(s.to_string()),
                }
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                $name::from(s.as_str())
            }
        }

        impl From<$name> for String {
            fn from(v: $name) -> String {
                v.name().to_string()
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.name() == *other
            }
        }
    };
}

pub(crate) use named;
