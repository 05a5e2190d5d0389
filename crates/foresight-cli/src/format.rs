//! The output formats (`-o table|json|csv`) and the one way every noun prints in them.
//!
//! A command offers some of the formats ([`Format::parser`]); what it prints is one value,
//! given to [`Format::print`] (or [`Format::print_records`] where `-o csv` is offered) with
//! the text people read: JSON is written the same way for every noun (indented, hidden
//! characters escaped, [`json_text`]), the table is the noun's own.

use anyhow::Result;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::Args;
use serde::Serialize;

/// An output format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// For people.
    #[default]
    Table,
    /// For programs.
    Json,
    /// For spreadsheets.
    Csv,
}

impl Format {
    /// The formats of the service's commands: `-o table|json`.
    pub const TABLE_JSON: [Format; 2] = [Format::Table, Format::Json];
    /// The formats of the accounting reports: `-o table|json|csv`.
    pub const TABLE_JSON_CSV: [Format; 3] = [Format::Table, Format::Json, Format::Csv];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Format::Table => "table",
            Format::Json => "json",
            Format::Csv => "csv",
        }
    }

    /// What it is for, as `--help` says.
    fn about(self) -> &'static str {
        match self {
            Format::Table => "For people",
            Format::Json => "For programs",
            Format::Csv => "For spreadsheets",
        }
    }

    /// The format named `name`.
    fn named(name: &str) -> Option<Format> {
        Format::TABLE_JSON_CSV
            .into_iter()
            .find(|f| f.name() == name)
    }

    /// The parser of an `-o` that offers `offered` (in that order), each described in
    /// `--help`.
    pub fn parser(offered: &'static [Format]) -> impl TypedValueParser<Value = Format> {
        Self::parser_of(
            offered
                .iter()
                .map(|f| PossibleValue::new(f.name()).help(f.about())),
        )
    }

    /// The same, the formats listed by name only.
    pub fn plain_parser(offered: &'static [Format]) -> impl TypedValueParser<Value = Format> {
        Self::parser_of(offered.iter().map(|f| PossibleValue::new(f.name())))
    }

    fn parser_of(
        values: impl Iterator<Item = PossibleValue>,
    ) -> impl TypedValueParser<Value = Format> {
        PossibleValuesParser::new(values).map(|name| {
            Format::named(&name).expect("invariant: the parser accepts format names only")
        })
    }

    /// Prints `value`: as JSON (indented), else as the text `table` makes for people.
    /// CSV, offered by no command that prints this way, prints the table.
    pub fn print<T: Serialize + ?Sized>(
        self,
        value: &T,
        table: impl FnOnce() -> String,
    ) -> Result<()> {
        match self {
            Format::Json => outln!("{}", json_text(value, true)?),
            Format::Table | Format::Csv => out!("{}", table()),
        }
        Ok(())
    }

    /// Prints `value` as [`Format::print`] does, but JSON on one line (what a script reads
    /// back after a submission).
    pub fn print_compact<T: Serialize + ?Sized>(
        self,
        value: &T,
        table: impl FnOnce() -> String,
    ) -> Result<()> {
        match self {
            Format::Json => outln!("{}", json_text(value, false)?),
            Format::Table | Format::Csv => out!("{}", table()),
        }
        Ok(())
    }

    /// Prints `value` as [`Format::print`] does, and for CSV the `header` then the
    /// `records`.
    pub fn print_records<T: Serialize + ?Sized>(
        self,
        value: &T,
        table: impl FnOnce() -> String,
        header: &[&str],
        records: impl FnOnce() -> Vec<Vec<String>>,
    ) -> Result<()> {
        if self != Format::Csv {
            return self.print(value, table);
        }
        let mut w = csv::Writer::from_writer(std::io::stdout().lock());
        w.write_record(header)?;
        for r in records() {
            w.write_record(&r)?;
        }
        w.flush()?;
        Ok(())
    }
}

/// `-o table|json`.
#[derive(Args, Clone, Copy, Debug)]
pub struct OutputOpt {
    /// Output format.
    #[arg(short = 'o', long, default_value = "table",
          value_parser = Format::parser(&Format::TABLE_JSON))]
    pub output: Format,
}

/// Only `-o`.
#[derive(Args)]
pub struct OutOnly {
    #[command(flatten)]
    pub out: OutputOpt,
}

/// `v` as JSON (`pretty`: indented), every hidden character of its strings written as a
/// `\uXXXX` escape: the same value, safe on a terminal.
pub fn json_text<T: serde::Serialize + ?Sized>(v: &T, pretty: bool) -> Result<String> {
    let text = if pretty {
        serde_json::to_string_pretty(v)?
    } else {
        serde_json::to_string(v)?
    };
    Ok(foresight_api::text::escaped_json(&text).into_owned())
}
