-- Templates users build: one row per build, a version of its template (template_id is
-- the same for every build of one name in one project). status: building, ready,
-- error. image: the template's image once ready; run_as, workdir, start_cmd (JSON argv)
-- what its sandboxes get; cpu_milli, memory_mb, isolation: their defaults. The newest
-- ready version of a name is the one a create uses.
CREATE TABLE template_builds (
    build_id TEXT PRIMARY KEY,
    template_id TEXT NOT NULL,
    organization_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    name TEXT NOT NULL,
    version BIGINT NOT NULL,
    status TEXT NOT NULL,
    image TEXT,
    run_as TEXT,
    workdir TEXT,
    start_cmd TEXT,
    cpu_milli BIGINT,
    memory_mb BIGINT,
    isolation TEXT,
    error_step BIGINT,
    error_message TEXT,
    created_by TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    finished_at BIGINT,
    UNIQUE (organization_id, project_id, name, version)
);
-- A build's log, line by line (seq from 0), kept with its build.
CREATE TABLE template_build_log (
    build_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    at BIGINT NOT NULL,
    step BIGINT NOT NULL,
    stream TEXT NOT NULL,
    line TEXT NOT NULL,
    PRIMARY KEY (build_id, seq)
);
