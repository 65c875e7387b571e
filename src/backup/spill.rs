//! The extraction jobs a NATS backup has still to write, kept in an unnamed temporary file
//! beside the backup while the streams between the session log and the extraction queue are
//! copied: a deployment whose extractors were down for days has one job per turn answered
//! since, and the backup's memory stays the same whatever their number.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::BackupError;

/// Jobs written as they are found and read back, in order, once.
pub struct JobSpill {
    dir: PathBuf,
    file: Option<BufWriter<File>>,
    count: u64,
}

fn failed(dir: &Path, what: &str, e: std::io::Error) -> BackupError {
    BackupError::Io {
        path: dir.display().to_string(),
        what: format!("{what} a temporary file of extraction jobs in"),
        reason: format!("{e}; the backup needs room for them beside its file"),
    }
}

impl JobSpill {
    /// Jobs to be kept in `dir` (the backup's own directory); no file until the first.
    pub fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
            file: None,
            count: 0,
        }
    }

    /// Keep `job` for later.
    pub fn push(&mut self, job: &[u8]) -> Result<(), BackupError> {
        let size =
            u32::try_from(job.len()).map_err(|_| BackupError::TooLarge { size: job.len() })?;
        let file = match &mut self.file {
            Some(file) => file,
            None => {
                let file = tempfile::tempfile_in(&self.dir)
                    .map_err(|e| failed(&self.dir, "cannot create", e))?;
                self.file.insert(BufWriter::new(file))
            }
        };
        file.write_all(&size.to_le_bytes())
            .and_then(|()| file.write_all(job))
            .map_err(|e| failed(&self.dir, "cannot write to", e))?;
        self.count += 1;
        Ok(())
    }

    /// The jobs kept, in the order they were pushed; the spill is empty again afterwards.
    pub fn drain(&mut self) -> Result<Jobs, BackupError> {
        let count = std::mem::take(&mut self.count);
        let reader = match self.file.take() {
            Some(writer) => {
                let mut file = writer
                    .into_inner()
                    .map_err(|e| failed(&self.dir, "cannot write to", e.into_error()))?;
                file.seek(SeekFrom::Start(0))
                    .map_err(|e| failed(&self.dir, "cannot read back", e))?;
                Some(BufReader::new(file))
            }
            None => None,
        };
        Ok(Jobs {
            dir: self.dir.clone(),
            reader,
            left: count,
        })
    }
}

/// The jobs of a drained [`JobSpill`]; the file goes when this is dropped.
pub struct Jobs {
    dir: PathBuf,
    reader: Option<BufReader<File>>,
    left: u64,
}

impl Iterator for Jobs {
    type Item = Result<Vec<u8>, BackupError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        let reader = self.reader.as_mut()?;
        self.left -= 1;
        let mut size = [0u8; 4];
        let read = reader.read_exact(&mut size).and_then(|()| {
            let mut job = vec![0u8; u32::from_le_bytes(size) as usize];
            reader.read_exact(&mut job).map(|()| job)
        });
        Some(read.map_err(|e| failed(&self.dir, "cannot read back", e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_come_back_in_the_order_they_were_kept_and_the_spill_can_be_used_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut spill = JobSpill::new(dir.path());
        let jobs: Vec<Vec<u8>> = (0..1000)
            .map(|i| format!("{{\"turn\":{i}}}").repeat(i % 7 + 1).into_bytes())
            .chain([Vec::new()])
            .collect();
        for job in &jobs {
            spill.push(job).unwrap();
        }
        let back: Vec<Vec<u8>> = spill.drain().unwrap().map(Result::unwrap).collect();
        assert_eq!(back, jobs);
        assert_eq!(spill.drain().unwrap().count(), 0, "drained once");
        spill.push(b"again").unwrap();
        let again: Vec<Vec<u8>> = spill.drain().unwrap().map(Result::unwrap).collect();
        assert_eq!(again, [b"again".to_vec()]);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "nothing left beside the backup"
        );
    }

    #[test]
    fn no_job_kept_makes_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut spill = JobSpill::new(dir.path());
        assert_eq!(spill.drain().unwrap().count(), 0);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
