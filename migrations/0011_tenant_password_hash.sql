-- A tenant's password is kept as an argon2id PHC string (a tenant made before keeps the
-- SHA-256 hex it had until its password is next set; the proxies check either).
ALTER TABLE tenants RENAME COLUMN password_sha256 TO password_hash;
