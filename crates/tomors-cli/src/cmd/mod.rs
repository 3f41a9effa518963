//! The subcommands of `tomors`: clap argument structs and the glue that
//! runs them (`recon`: parse → [`crate::job::Job`] → [`crate::run`]).

pub mod args;
pub mod bench;
pub mod center;
pub mod demo;
pub mod info;
pub mod model;
pub mod phantom;
pub mod recon;
pub mod tune;
