-- Roles: `admin` (everything, users and API tokens too), `operator` (every change but users
-- and tokens), `viewer` (reads only). Users existing so far were admins.
ALTER TABLE users ADD COLUMN role TEXT NOT NULL DEFAULT 'admin';
-- A token acts with its own role (at most its creator's) until it expires (NULL: never).
ALTER TABLE api_tokens ADD COLUMN role TEXT NOT NULL DEFAULT 'admin';
ALTER TABLE api_tokens ADD COLUMN expires_at INTEGER;
ALTER TABLE api_tokens ADD COLUMN created_by TEXT;
-- Events are the audit log too: who (a user, a token; NULL: the console itself), what it
-- changed, and the state before and after (JSON) where there is one.
ALTER TABLE events ADD COLUMN actor TEXT;
ALTER TABLE events ADD COLUMN target TEXT;
ALTER TABLE events ADD COLUMN before_state TEXT;
ALTER TABLE events ADD COLUMN after_state TEXT;
