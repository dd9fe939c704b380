//! Attacks: workspace_files.
