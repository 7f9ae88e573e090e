//! amber client library.
