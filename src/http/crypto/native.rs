//! AES-256-GCM for native builds (tests, benchmarks, native tools), from RustCrypto's `aes-gcm`. The
//! Worker uses the platform's Web Crypto instead (`webcrypto.rs`), the npm module its JS; all produce the
//! same bytes for the same key, IV and plaintext (a 16-byte IV, a 16-byte tag, no associated data).

use super::envelope::{Sealed, IV_BYTES, TAG_BYTES};
use aes_gcm::aead::consts::U16;
use aes_gcm::aead::generic_array::GenericArray;
use aes_gcm::aead::rand_core::RngCore;
use aes_gcm::aead::{AeadInPlace, KeyInit, OsRng};
use aes_gcm::aes::Aes256;
use aes_gcm::AesGcm;

/// AES-256-GCM with Queen's 16-byte IV.
type Aes256Gcm16 = AesGcm<Aes256, U16>;

/// An AES-256 key, ready to seal and open.
pub(super) struct Key {
    cipher: Aes256Gcm16,
}

impl Key {
    /// The key of 32 raw bytes.
    pub(super) fn from_bytes(bytes: &[u8; 32]) -> Result<Key, String> {
        Ok(Key {
            cipher: Aes256Gcm16::new(GenericArray::from_slice(bytes)),
        })
    }

    /// Encrypts each plaintext under its own fresh random IV.
    pub(super) async fn seal_all(&self, plaintexts: &[Vec<u8>]) -> Result<Vec<Sealed>, String> {
        plaintexts.iter().map(|p| self.seal(p)).collect()
    }

    /// Decrypts and authenticates each envelope; `None` for one whose tag does not match.
    pub(super) async fn open_all(&self, sealed: &[Sealed]) -> Vec<Option<Vec<u8>>> {
        sealed.iter().map(|s| self.open(s)).collect()
    }

    fn seal(&self, plaintext: &[u8]) -> Result<Sealed, String> {
        let mut iv = [0u8; IV_BYTES];
        OsRng
            .try_fill_bytes(&mut iv)
            .map_err(|e| format!("no randomness for the IV: {e}"))?;
        let mut ciphertext = plaintext.to_vec();
        let tag = self
            .cipher
            .encrypt_in_place_detached(GenericArray::from_slice(&iv), b"", &mut ciphertext)
            .map_err(|_| "AES-GCM refused to encrypt".to_string())?;
        let mut auth_tag = [0u8; TAG_BYTES];
        auth_tag.copy_from_slice(&tag);
        Ok(Sealed {
            iv,
            ciphertext,
            auth_tag,
        })
    }

    fn open(&self, sealed: &Sealed) -> Option<Vec<u8>> {
        let mut plaintext = sealed.ciphertext.clone();
        self.cipher
            .decrypt_in_place_detached(
                GenericArray::from_slice(&sealed.iv),
                b"",
                &mut plaintext,
                GenericArray::from_slice(&sealed.auth_tag),
            )
            .ok()?;
        Some(plaintext)
    }
}
