//! `hermes schema`: the wire's JSON Schema (one document per envelope kind and an index by
//! subject), as committed under `schema/`, for clients written in other languages.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

#[derive(Args)]
pub struct SchemaArgs {
    /// Write the documents into this directory (created if missing); without it, print the
    /// index of subjects and kinds.
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn run(args: SchemaArgs) -> anyhow::Result<()> {
    let files = hermes::protocol::schema::files();
    let Some(dir) = args.out else {
        print!("{}", files["index.json"]);
        return Ok(());
    };
    std::fs::create_dir_all(&dir).with_context(|| {
        format!(
            "cannot create {}; check the path and its permissions",
            dir.display()
        )
    })?;
    for (name, text) in &files {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| {
            format!(
                "cannot write {}; check the directory's permissions",
                path.display()
            )
        })?;
    }
    eprintln!(
        "wrote {} schema documents to {} (index.json lists subjects and kinds)",
        files.len(),
        dir.display()
    );
    Ok(())
}
