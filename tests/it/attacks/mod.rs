//! The attacks of the security issue, one test each, against the real binary: what a cloned
//! repository, a model under `full-auto` or a sandboxed command can try at the seams where
//! Garuda itself runs a program or opens a file because the workspace said so. Each test
//! failed on the main branch before its fix; docs/security.md names them claim by claim.

mod git;
mod names;
mod trust;
mod workspace_files;
