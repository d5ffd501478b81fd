-- A check value of the master key (an HMAC under a key derived from it), so that a
-- replica started with another master key than the one that sealed this database's
-- secrets refuses to start instead of failing every key and secret.
ALTER TABLE installation ADD COLUMN key_check TEXT;

-- Change notices for the in-memory caches of the other replicas, sent at commit on the
-- channel `sandboxd_changes` as `<application_name> <kind> [<id>]`: every replica
-- connects with its own application_name and ignores its own notices.
CREATE FUNCTION sandboxd_sandbox_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    id TEXT;
BEGIN
    IF TG_OP = 'DELETE' THEN
        id := OLD.sandbox_id;
    ELSE
        id := NEW.sandbox_id;
    END IF;
    PERFORM pg_notify('sandboxd_changes', current_setting('application_name') || ' sandbox ' || id);
    RETURN NULL;
END
$$;

CREATE TRIGGER sandboxes_changed AFTER INSERT OR UPDATE OR DELETE ON sandboxes
    FOR EACH ROW EXECUTE FUNCTION sandboxd_sandbox_changed();

-- A remote server's record: replicas drop the engine they made for it.
CREATE FUNCTION sandboxd_server_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('sandboxd_changes', current_setting('application_name') || ' server ' || OLD.server_id);
    RETURN NULL;
END
$$;

CREATE TRIGGER servers_changed AFTER UPDATE OR DELETE ON servers
    FOR EACH ROW EXECUTE FUNCTION sandboxd_server_changed();

-- What a caller may do comes from its key, its membership, its user and organization.
CREATE FUNCTION sandboxd_access_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('sandboxd_changes', current_setting('application_name') || ' access');
    RETURN NULL;
END
$$;

CREATE TRIGGER api_keys_changed AFTER UPDATE OR DELETE ON api_keys
    FOR EACH STATEMENT EXECUTE FUNCTION sandboxd_access_changed();
CREATE TRIGGER members_changed AFTER UPDATE OR DELETE ON members
    FOR EACH STATEMENT EXECUTE FUNCTION sandboxd_access_changed();
CREATE TRIGGER users_changed AFTER UPDATE OR DELETE ON users
    FOR EACH STATEMENT EXECUTE FUNCTION sandboxd_access_changed();
CREATE TRIGGER organizations_changed AFTER UPDATE OR DELETE ON organizations
    FOR EACH STATEMENT EXECUTE FUNCTION sandboxd_access_changed();
