-- Tenants deleted while an engine could not drop their namespace (down, or a replica since
-- promoted): the reconcile loop drops them from every primary it pushes to. A tenant created
-- again under the same name leaves the list.
CREATE TABLE dropped_tenants (
    name TEXT PRIMARY KEY,
    deleted_at INTEGER NOT NULL
);

-- The advisor's last recommendation per tenant: the incumbent its hysteresis keeps until
-- another configuration is materially cheaper (cost::advisor::MATERIAL_GAIN).
CREATE TABLE advisor_state (
    tenant TEXT PRIMARY KEY,
    recommended TEXT NOT NULL,
    since INTEGER NOT NULL
);
