//! The demo product catalog: the embedded `config/demo-catalog.json`, its product type, and
//! the search/lookup logic the catalog MCP server exposes (pure functions, no MCP here).

use rmcp::schemars;
use serde::{Deserialize, Serialize};

/// The catalog file compiled into the binary.
const EMBEDDED_CATALOG: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/config/demo-catalog.json"
));

/// How many products a search returns when the caller gives no `limit`.
pub const DEFAULT_LIMIT: u32 = 5;
/// The largest `limit` a search accepts.
pub const MAX_LIMIT: u32 = 50;

/// One product of the catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct Product {
    /// Stable product id, e.g. `SONY-WH1000XM6`.
    pub sku: String,
    /// Brand in English, e.g. `Sony`.
    pub brand: String,
    /// Brand in Chinese, e.g. `索尼`.
    pub brand_zh: String,
    pub name: String,
    /// `headphones`, `phone` or `laptop`.
    pub category: String,
    /// Price in yuan (CNY).
    pub price_yuan: u32,
    /// Release date, `YYYY-MM-DD`.
    pub release_date: String,
    pub highlights: Vec<String>,
}

/// Arguments of `search_products`; every filter is optional and they combine with AND.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct SearchQuery {
    /// Brand, in English or Chinese, case-insensitive (e.g. "sony" or "索尼").
    #[serde(default)]
    pub brand: Option<String>,
    /// Category, case-insensitive: "headphones", "phone" or "laptop".
    #[serde(default)]
    pub category: Option<String>,
    /// Highest price in yuan (inclusive).
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub max_price_yuan: Option<f64>,
    /// Text to find (case-insensitive) in the product name or highlights, e.g. "noise cancelling".
    #[serde(default)]
    pub query: Option<String>,
    /// How many products to return, 1 to 50; default 5.
    #[serde(default)]
    #[schemars(range(min = 1, max = 50))]
    pub limit: Option<u32>,
}

/// What `search_products` returns: the newest matching products first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct SearchResult {
    /// How many products matched before `limit` was applied.
    pub total_matches: usize,
    /// The returned products, newest release first.
    pub products: Vec<Product>,
}

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("the embedded demo catalog (config/demo-catalog.json) is invalid: {0}; fix the file and rebuild")]
    InvalidCatalog(#[from] serde_json::Error),
    #[error("invalid search: {0}")]
    InvalidQuery(String),
}

#[derive(Debug, Deserialize)]
struct CatalogFile {
    products: Vec<Product>,
}

/// The products, loaded once.
#[derive(Debug, Clone, PartialEq)]
pub struct Catalog {
    products: Vec<Product>,
}

impl Catalog {
    /// The catalog compiled into the binary.
    pub fn embedded() -> Result<Self, CatalogError> {
        Self::from_json(EMBEDDED_CATALOG)
    }

    /// A catalog from the JSON text of a catalog file (`{"products": [...]}`).
    pub fn from_json(text: &str) -> Result<Self, CatalogError> {
        let file: CatalogFile = serde_json::from_str(text)?;
        Ok(Self {
            products: file.products,
        })
    }

    pub fn products(&self) -> &[Product] {
        &self.products
    }

    /// The product with this sku (exact, case-insensitive).
    pub fn get(&self, sku: &str) -> Option<&Product> {
        let sku = sku.trim();
        self.products
            .iter()
            .find(|product| product.sku.eq_ignore_ascii_case(sku))
    }

    /// The products matching every given filter, newest release first (ties by sku), at most
    /// `limit` of them.
    pub fn search(&self, query: &SearchQuery) -> Result<SearchResult, CatalogError> {
        let limit = checked_limit(query.limit)?;
        if let Some(max) = query.max_price_yuan {
            if max < 0.0 {
                return Err(CatalogError::InvalidQuery(format!(
                    "max_price_yuan must not be negative (got {max})"
                )));
            }
        }
        let filter = Filter::new(query);
        let mut matches: Vec<&Product> = self
            .products
            .iter()
            .filter(|product| filter.accepts(product))
            .collect();
        matches.sort_by(|a, b| {
            b.release_date
                .cmp(&a.release_date)
                .then_with(|| a.sku.cmp(&b.sku))
        });
        let total_matches = matches.len();
        let products = matches.into_iter().take(limit).cloned().collect();
        Ok(SearchResult {
            total_matches,
            products,
        })
    }
}

fn checked_limit(limit: Option<u32>) -> Result<usize, CatalogError> {
    let limit = limit.unwrap_or(DEFAULT_LIMIT);
    if limit == 0 || limit > MAX_LIMIT {
        return Err(CatalogError::InvalidQuery(format!(
            "limit must be between 1 and {MAX_LIMIT} (got {limit})"
        )));
    }
    usize::try_from(limit)
        .map_err(|_| CatalogError::InvalidQuery(format!("limit {limit} is too large")))
}

/// A [`SearchQuery`] normalised for matching (trimmed, lower-cased, empty strings ignored).
struct Filter {
    brand: Option<String>,
    category: Option<String>,
    max_price_yuan: Option<f64>,
    query: Option<String>,
}

impl Filter {
    fn new(query: &SearchQuery) -> Self {
        Self {
            brand: normalised(query.brand.as_deref()),
            category: normalised(query.category.as_deref()),
            max_price_yuan: query.max_price_yuan,
            query: normalised(query.query.as_deref()),
        }
    }

    fn accepts(&self, product: &Product) -> bool {
        let brand_ok = self.brand.as_ref().is_none_or(|brand| {
            product.brand.to_lowercase() == *brand || product.brand_zh.to_lowercase() == *brand
        });
        let category_ok = self
            .category
            .as_ref()
            .is_none_or(|category| product.category.to_lowercase() == *category);
        let price_ok = self
            .max_price_yuan
            .is_none_or(|max| f64::from(product.price_yuan) <= max);
        let query_ok = self.query.as_ref().is_none_or(|text| {
            product.name.to_lowercase().contains(text)
                || product
                    .highlights
                    .iter()
                    .any(|highlight| highlight.to_lowercase().contains(text))
        });
        brand_ok && category_ok && price_ok && query_ok
    }
}

fn normalised(value: Option<&str>) -> Option<String> {
    value
        .map(str::trim)
        .filter(|value| !value.is_empty())
        .map(str::to_lowercase)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn skus(result: &SearchResult) -> Vec<&str> {
        result.products.iter().map(|p| p.sku.as_str()).collect()
    }

    fn catalog() -> Catalog {
        Catalog::embedded().expect("embedded catalog parses")
    }

    #[test]
    fn embedded_catalog_is_well_formed() {
        let catalog = catalog();
        assert!(catalog.products().len() >= 15);
        for product in catalog.products() {
            assert!(
                ["headphones", "phone", "laptop"].contains(&product.category.as_str()),
                "{} has an unknown category",
                product.sku
            );
            assert!(
                chrono::NaiveDate::parse_from_str(&product.release_date, "%Y-%m-%d").is_ok(),
                "{} has a bad release_date",
                product.sku
            );
        }
        let mut skus: Vec<_> = catalog.products().iter().map(|p| &p.sku).collect();
        skus.sort();
        skus.dedup();
        assert_eq!(skus.len(), catalog.products().len(), "skus must be unique");
    }

    #[test]
    fn sony_headphones_under_5000_come_newest_first_without_the_premium_model() {
        let result = catalog()
            .search(&SearchQuery {
                brand: Some("sony".into()),
                category: Some("headphones".into()),
                max_price_yuan: Some(5000.0),
                ..SearchQuery::default()
            })
            .unwrap();
        assert_eq!(
            skus(&result),
            vec![
                "SONY-WF1000XM6",
                "SONY-WH1000XM6",
                "SONY-LINKBUDSFIT",
                "SONY-ULTWEAR",
                "SONY-WH1000XM5"
            ]
        );
        assert_eq!(result.total_matches, 5);
    }

    #[test]
    fn chinese_brand_name_matches_like_the_english_one() {
        let catalog = catalog();
        let zh = catalog
            .search(&SearchQuery {
                brand: Some("索尼".into()),
                limit: Some(50),
                ..SearchQuery::default()
            })
            .unwrap();
        let en = catalog
            .search(&SearchQuery {
                brand: Some(" SONY ".into()),
                limit: Some(50),
                ..SearchQuery::default()
            })
            .unwrap();
        assert_eq!(zh, en);
        assert_eq!(zh.total_matches, 6);
        assert!(zh.products.iter().any(|p| p.sku == "SONY-MDRZ1R"));
    }

    #[test]
    fn price_limit_is_inclusive() {
        let result = catalog()
            .search(&SearchQuery {
                max_price_yuan: Some(1299.0),
                limit: Some(50),
                ..SearchQuery::default()
            })
            .unwrap();
        assert_eq!(skus(&result), vec!["XIAOMI-BUDS5PRO", "SONY-ULTWEAR"]);
    }

    #[test]
    fn query_matches_name_or_highlights_case_insensitively() {
        let catalog = catalog();
        let by_name = catalog
            .search(&SearchQuery {
                query: Some("airpods".into()),
                ..SearchQuery::default()
            })
            .unwrap();
        assert_eq!(
            skus(&by_name),
            vec!["APPLE-AIRPODSPRO3", "APPLE-AIRPODSMAX-USBC"]
        );
        let by_highlight = catalog
            .search(&SearchQuery {
                query: Some("LEICA".into()),
                ..SearchQuery::default()
            })
            .unwrap();
        assert_eq!(skus(&by_highlight), vec!["XIAOMI-15ULTRA"]);
    }

    #[test]
    fn limit_defaults_to_five_and_reports_the_total() {
        let result = catalog().search(&SearchQuery::default()).unwrap();
        assert_eq!(result.products.len(), 5);
        assert_eq!(result.total_matches, catalog().products().len());
        let dates: Vec<_> = result.products.iter().map(|p| &p.release_date).collect();
        let mut sorted = dates.clone();
        sorted.sort_by(|a, b| b.cmp(a));
        assert_eq!(dates, sorted);
    }

    #[test]
    fn category_filter_is_exact_not_substring() {
        let result = catalog()
            .search(&SearchQuery {
                category: Some("head".into()),
                ..SearchQuery::default()
            })
            .unwrap();
        assert_eq!(result.total_matches, 0);
        let phones = catalog()
            .search(&SearchQuery {
                category: Some("PHONE".into()),
                ..SearchQuery::default()
            })
            .unwrap();
        assert_eq!(phones.total_matches, 3);
    }

    #[test]
    fn zero_or_huge_limit_and_negative_price_are_rejected() {
        let catalog = catalog();
        for query in [
            SearchQuery {
                limit: Some(0),
                ..SearchQuery::default()
            },
            SearchQuery {
                limit: Some(MAX_LIMIT + 1),
                ..SearchQuery::default()
            },
            SearchQuery {
                max_price_yuan: Some(-1.0),
                ..SearchQuery::default()
            },
        ] {
            let error = catalog.search(&query).unwrap_err();
            assert!(matches!(error, CatalogError::InvalidQuery(_)), "{error}");
        }
    }

    #[test]
    fn get_finds_a_sku_case_insensitively() {
        let catalog = catalog();
        assert_eq!(
            catalog.get("sony-wh1000xm6").map(|p| p.price_yuan),
            Some(2999)
        );
        assert!(catalog.get("NOPE-1").is_none());
    }
}
