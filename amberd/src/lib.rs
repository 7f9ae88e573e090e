//! The amber daemon library.
