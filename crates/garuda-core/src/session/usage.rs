//! What a session's model requests used and cost, per purpose (the main loop, summaries,
//! collapses, the compaction worker, agents), from its usage records.

use super::Record;
use super::records::UsagePurpose;
use crate::message::Usage;
use crate::provider::models::Prices;

/// The requests of one purpose over a session.
#[derive(Debug, Clone, PartialEq)]
pub struct PurposeUsage {
    /// The purpose; None: the main loop's requests.
    pub purpose: Option<UsagePurpose>,
    /// Usage records (an agent's record sums its whole run).
    pub requests: u64,
    /// Their usage, summed.
    pub usage: Usage,
    /// Their cost in US dollars; None without prices.
    pub cost_usd: Option<f64>,
}

/// The session's usage per purpose, main loop first, then summaries, collapses, the worker
/// and agents; purposes without a request are left out. An agent's record on its own model
/// counts at the cost recorded with it.
pub fn by_purpose(records: &[Record], prices: Option<&Prices>) -> Vec<PurposeUsage> {
    let order = [
        None,
        Some(UsagePurpose::Summary),
        Some(UsagePurpose::Collapse),
        Some(UsagePurpose::Worker),
        Some(UsagePurpose::Memory),
        Some(UsagePurpose::Agent),
    ];
    let mut rows: Vec<PurposeUsage> = order
        .iter()
        .map(|&purpose| PurposeUsage {
            purpose,
            requests: 0,
            usage: Usage::default(),
            cost_usd: prices.map(|_| 0.0),
        })
        .collect();
    for r in records {
        let Record::Usage(u) = r else { continue };
        let Some(row) = rows.iter_mut().find(|row| row.purpose == u.purpose) else {
            continue;
        };
        row.requests += 1;
        row.usage.add(&u.usage);
        if let (Some(c), Some(p)) = (row.cost_usd.as_mut(), prices) {
            *c += u.cost_usd.unwrap_or_else(|| p.cost(&u.usage));
        }
    }
    rows.retain(|r| r.requests > 0);
    rows
}

/// The session's cost so far in US dollars: every usage record at `prices` (an agent's on its
/// own model at the cost recorded with it), plus `latest` (not yet recorded).
pub fn session_cost(records: &[Record], prices: &Prices, latest: &Usage) -> f64 {
    let recorded: f64 = by_purpose(records, Some(prices))
        .iter()
        .filter_map(|r| r.cost_usd)
        .sum();
    recorded + prices.cost(latest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::records::UsageRecord;

    fn rec(purpose: Option<UsagePurpose>, read: u64, cost_usd: Option<f64>) -> Record {
        Record::Usage(UsageRecord {
            uuid: "u".into(),
            time: 0,
            message_id: "m".into(),
            usage: Usage {
                input_tokens: 1_000,
                output_tokens: 100,
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: read,
                cleared_input_tokens: 0,
            },
            request_chars: None,
            view_chars: None,
            purpose,
            cost_usd,
            cache_miss: None,
        })
    }

    #[test]
    fn usage_is_summed_per_purpose_in_a_fixed_order() {
        let records = vec![
            rec(Some(UsagePurpose::Collapse), 9_000, None),
            rec(None, 50_000, None),
            rec(None, 60_000, None),
            rec(Some(UsagePurpose::Agent), 0, Some(0.5)),
        ];
        let prices = Prices {
            input: 3.0,
            output: 15.0,
            cache_read: 0.3,
            cache_write: 3.75,
        };
        let rows = by_purpose(&records, Some(&prices));
        let purposes: Vec<_> = rows.iter().map(|r| r.purpose).collect();
        assert_eq!(
            purposes,
            vec![
                None,
                Some(UsagePurpose::Collapse),
                Some(UsagePurpose::Agent)
            ]
        );
        assert_eq!(rows[0].requests, 2);
        assert_eq!(rows[0].usage.cache_read_input_tokens, 110_000);
        // The agent's recorded cost stands; the others are priced.
        assert_eq!(rows[2].cost_usd, Some(0.5));
        let total = session_cost(&records, &prices, &Usage::default());
        let priced: f64 = rows.iter().filter_map(|r| r.cost_usd).sum();
        assert!((total - priced).abs() < 1e-12);
        assert!(
            by_purpose(&records, None)
                .iter()
                .all(|r| r.cost_usd.is_none())
        );
    }
}
