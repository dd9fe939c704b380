//! Tool tests against tempdir workspaces.
