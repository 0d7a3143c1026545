//! Bearer JWTs (HS256) for the server: `sub` is the owner, `role` user or admin, `exp`
//! enforced. The secret comes from the config (`server.jwt_secret`), else
//! `CORRAL_JWT_SECRET`, else a file generated on first start with mode 0600.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Admin,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    pub sub: String,
    pub role: Role,
    pub exp: u64,
}

impl Claims {
    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }

    /// May this caller see and drive a session owned by `owner`?
    pub fn may_use(&self, owner: &str) -> bool {
        self.is_admin() || self.sub == owner
    }

    /// How long the token stays valid: streams opened with it end then.
    pub fn remaining(&self) -> Duration {
        let expires = UNIX_EPOCH + Duration::from_secs(self.exp);
        expires
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("cannot read or create the JWT secret {path}: {source}")]
    Secret {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid token: {0}")]
    Invalid(String),
    #[error("cannot sign the token: {0}")]
    Sign(String),
}

#[derive(Clone)]
pub struct Auth {
    encoding: EncodingKey,
    decoding: DecodingKey,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Auth(HS256)")
    }
}

/// `$XDG_CONFIG_HOME/corral/jwt-secret`.
pub fn default_secret_path() -> Option<PathBuf> {
    crate::config::Config::jwt_secret_path()
}

/// The secret in the documented order; generates the file when nothing else gives one.
pub fn load_secret(configured: Option<&str>, file: &Path) -> Result<Vec<u8>, AuthError> {
    if let Some((_, secret)) =
        crate::config::jwt_secret(configured, |name| std::env::var(name).ok())
    {
        return Ok(secret.into_bytes());
    }
    let error = |source| AuthError::Secret {
        path: file.to_path_buf(),
        source,
    };
    let replace = match std::fs::read(file) {
        Ok(bytes) if legacy_generated(bytes.trim_ascii()) => {
            tracing::warn!(
                path = %file.display(),
                "replacing a JWT secret made by an older corral from a predictable PRNG; \
                 tokens minted with it stop working"
            );
            true
        }
        Ok(bytes) if !bytes.trim_ascii().is_empty() => return Ok(bytes.trim_ascii().to_vec()),
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(error(e)),
    };
    let dir = file.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(error)?;
    // 256 bits from the OS RNG, written as hex so the file stays text.
    let secret = crate::session::ids::secret_hex();
    if replace {
        // Written aside and renamed over, so a reader never sees half a secret.
        let mut out = tempfile::NamedTempFile::new_in(dir).map_err(error)?;
        out.write_all(secret.as_bytes()).map_err(error)?;
        out.persist(file).map_err(|e| error(e.error))?;
    } else {
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(file)
            .map_err(error)?;
        out.write_all(secret.as_bytes()).map_err(error)?;
    }
    Ok(secret.into_bytes())
}

/// A secret of the shape older corrals generated with fastrand (48 letters and digits): its
/// seed, and so the secret, could be recovered from the file's mtime.
fn legacy_generated(secret: &[u8]) -> bool {
    secret.len() == 48 && secret.iter().all(u8::is_ascii_alphanumeric)
}

impl Auth {
    pub fn new(secret: &[u8]) -> Result<Auth, AuthError> {
        let invalid = |e: jsonwebtoken::errors::Error| AuthError::Sign(e.to_string());
        Ok(Auth {
            encoding: EncodingKey::from_secret(secret).map_err(invalid)?,
            decoding: DecodingKey::from_secret(secret).map_err(invalid)?,
        })
    }

    pub fn mint(&self, sub: &str, role: Role, ttl: Duration) -> Result<String, AuthError> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let claims = Claims {
            sub: sub.to_string(),
            role,
            exp: (now + ttl).as_secs(),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .map_err(|e| AuthError::Sign(e.to_string()))
    }

    pub fn verify(&self, token: &str) -> Result<Claims, AuthError> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = 0;
        validation.set_required_spec_claims(&["exp", "sub"]);
        jsonwebtoken::decode::<Claims>(token, &self.decoding, &validation)
            .map(|data| data.claims)
            .map_err(|e| AuthError::Invalid(e.to_string()))
    }
}

/// `24h`, `30m`, `90s`, `7d` → a duration.
pub fn parse_ttl(text: &str) -> Option<Duration> {
    let text = text.trim();
    let (number, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit())?);
    let n: u64 = number.parse().ok()?;
    let secs = match unit {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        "d" => n * 86400,
        _ => return None,
    };
    Some(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_bad_ones_are_refused() {
        let auth = Auth::new(b"secret-one").unwrap();
        let token = auth
            .mint("ana", Role::Admin, Duration::from_secs(60))
            .unwrap();
        let claims = auth.verify(&token).unwrap();
        assert_eq!(claims.sub, "ana");
        assert!(claims.is_admin() && claims.may_use("bob"));
        assert!(Auth::new(b"secret-two").unwrap().verify(&token).is_err());
        assert!(auth.verify("not.a.token").is_err());
        let expired = auth.mint("ana", Role::User, Duration::ZERO).unwrap();
        std::thread::sleep(Duration::from_millis(1100));
        assert!(auth.verify(&expired).is_err());
    }

    #[test]
    fn the_secret_file_is_generated_once_with_mode_0600() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("corral/jwt-secret");
        let first = load_secret(None, &file).unwrap();
        assert_eq!(first.len(), 64, "256 bits as hex");
        assert!(first.iter().all(u8::is_ascii_hexdigit));
        assert_eq!(load_secret(None, &file).unwrap(), first);
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // A secret an older corral made with a seeded PRNG is replaced, still 0600.
        let legacy = "aB3".repeat(16);
        std::fs::write(&file, &legacy).unwrap();
        let fresh = load_secret(None, &file).unwrap();
        assert_ne!(fresh, legacy.as_bytes());
        assert_eq!(std::fs::read(&file).unwrap(), fresh);
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            load_secret(Some("configured"), &file).unwrap(),
            b"configured"
        );
    }

    #[test]
    fn ttls_parse() {
        assert_eq!(parse_ttl("24h"), Some(Duration::from_secs(86400)));
        assert_eq!(parse_ttl("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_ttl("1w"), None);
        assert_eq!(parse_ttl("h"), None);
    }
}
