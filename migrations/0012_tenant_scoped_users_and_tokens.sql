-- A user or API token may be scoped to one tenant (its own people: they see and manage that
-- tenant alone); NULL: the whole appliance, as before. Deleting the tenant deletes them.
ALTER TABLE users ADD COLUMN tenant TEXT;
ALTER TABLE api_tokens ADD COLUMN tenant TEXT;
