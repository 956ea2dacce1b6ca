//! The typed errors of the library and their exit codes.
