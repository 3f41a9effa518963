//! Logging of a distributed job: rank 0 logs as the single-process tool;
//! the other ranks log warnings and errors only, each line prefixed with
//! `[rank N]`.

use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{DefaultFields, Format, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The default event format with `[rank N] ` in front.
struct RankFormat {
    rank: usize,
    inner: Format<tracing_subscriber::fmt::format::Full, ()>,
}

impl<S, N> FormatEvent<S, N> for RankFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        write!(writer, "[rank {}] ", self.rank)?;
        self.inner.format_event(ctx, writer, event)
    }
}

/// Installs the logger of a rank other than 0 of a distributed job
/// (launched as [`crate::launch::is_distributed`] says): warnings and
/// errors only (or `TOMORS_LOG`), prefixed with the rank. Returns `false`
/// (and installs nothing) for rank 0 and single processes, which log as
/// usual.
pub fn init_rank_logging() -> bool {
    if !crate::launch::is_distributed() {
        return false;
    }
    let Some(rank) = crate::launch::launched_rank().filter(|&r| r > 0) else {
        return false;
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("TOMORS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let format = RankFormat {
        rank,
        inner: Format::default().with_target(false).without_time(),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .fmt_fields(DefaultFields::new())
        .event_format(format)
        .with_writer(std::io::stderr)
        .init();
    true
}
