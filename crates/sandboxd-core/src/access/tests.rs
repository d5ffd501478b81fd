use super::*;

fn caller(role: Role, permissions: Permissions) -> Principal {
    Principal {
        user_id: "u".into(),
        organization_id: "o".into(),
        role,
        key_id: "k".into(),
        permissions,
        key_scopes: None,
        key_expires_at: None,
    }
}

#[test]
fn names_round_trip_and_unknown_names_are_reported() {
    let all = Permissions::all();
    assert_eq!(Permissions::parse(&all.names()), Ok(all));
    assert_eq!(Permissions::from_text(&all.to_text()), all);
    assert_eq!(
        Permissions::parse(&["service:read", "root"]),
        Err("root".to_owned())
    );
}

#[test]
fn members_never_hold_organization_admin_and_scopes_narrow_everyone() {
    assert!(
        !effective(Role::Member, Permissions::all(), None).contains(Permission::OrganizationAdmin)
    );
    assert_eq!(
        effective(Role::Owner, Permissions::NONE, None),
        Permissions::all()
    );
    let read: Permissions = [Permission::ServiceRead].into_iter().collect();
    assert_eq!(effective(Role::Owner, Permissions::NONE, Some(read)), read);
    assert_eq!(
        effective(Role::Member, Permissions::NONE, Some(Permissions::all())),
        Permissions::NONE
    );
}

#[test]
fn each_sandbox_need_maps_to_the_reference_permission() {
    let read_only = caller(Role::Member, Permissions::member_default());
    assert_eq!(check_sandbox(&read_only, SandboxNeed::Read, true), Ok(()));
    assert_eq!(
        check_sandbox(&read_only, SandboxNeed::Use, true),
        Err(Denied::Missing(Permission::DeploymentCreate))
    );
    assert_eq!(
        check_sandbox(&read_only, SandboxNeed::Delete, true),
        Err(Denied::Missing(Permission::ServiceDelete))
    );
    assert_eq!(
        check_sandbox(&read_only, SandboxNeed::Read, false),
        Err(Denied::NotListed("sandbox"))
    );
    let owner = caller(Role::Owner, Permissions::all());
    assert_eq!(check_sandbox(&owner, SandboxNeed::Delete, false), Ok(()));
}

#[test]
fn creating_needs_the_permission_and_the_project() {
    let member = caller(Role::Member, Permissions::grantable());
    assert_eq!(check_create_in_project(&member, true), Ok(()));
    assert_eq!(
        check_create_in_project(&member, false),
        Err(Denied::NotListed("project"))
    );
    let reader = caller(Role::Member, Permissions::member_default());
    assert_eq!(
        check_create_in_project(&reader, true),
        Err(Denied::Missing(Permission::ServiceCreate))
    );
}

#[test]
fn admins_manage_members_and_only_owners_manage_admins() {
    let admin = caller(Role::Admin, Permissions::all());
    assert_eq!(check_manage_member(&admin, "m", Role::Member, None), Ok(()));
    assert!(check_manage_member(&admin, "m", Role::Member, Some(Role::Admin)).is_err());
    assert!(check_manage_member(&admin, "a", Role::Admin, None).is_err());
    let owner = caller(Role::Owner, Permissions::all());
    assert_eq!(
        check_manage_member(&owner, "a", Role::Admin, Some(Role::Owner)),
        Ok(())
    );
    assert!(check_manage_member(&owner, "u", Role::Owner, Some(Role::Member)).is_err());
    let member = caller(Role::Member, Permissions::grantable());
    assert_eq!(
        check_manage_member(&member, "m", Role::Member, None),
        Err(Denied::Missing(Permission::OrganizationAdmin))
    );
    let scoped_owner = caller(Role::Owner, Permissions::grantable());
    assert!(check_manage_member(&scoped_owner, "m", Role::Member, None).is_err());
}

#[test]
fn admins_add_members_and_only_owners_add_admins() {
    let admin = caller(Role::Admin, Permissions::all());
    assert_eq!(check_add_member(&admin, None), Ok(()));
    assert!(check_add_member(&admin, Some(Role::Admin)).is_err());
    let owner = caller(Role::Owner, Permissions::all());
    assert_eq!(check_add_member(&owner, Some(Role::Owner)), Ok(()));
    let member = caller(Role::Member, Permissions::grantable());
    assert!(check_add_member(&member, None).is_err());
}

#[test]
fn other_users_keys_are_member_management() {
    let member = caller(Role::Member, Permissions::member_default());
    assert_eq!(check_manage_key(&member, "u", Role::Member), Ok(()));
    assert!(check_manage_key(&member, "other", Role::Member).is_err());
    let admin = caller(Role::Admin, Permissions::all());
    assert_eq!(check_manage_key(&admin, "m", Role::Member), Ok(()));
    assert!(check_manage_key(&admin, "o", Role::Owner).is_err());
}

#[test]
fn a_new_key_is_never_wider_or_longer_lived_than_its_creator() {
    let read = Permissions::member_default();
    // An unscoped, non-expiring key makes what it is asked for.
    let owner = caller(Role::Owner, Permissions::all());
    assert_eq!(bound_new_key(&owner, None, None), Ok((None, None)));
    assert_eq!(
        bound_new_key(&owner, Some(read), Some(5)),
        Ok((Some(read), Some(5)))
    );
    // A scoped, expiring key: omitted scopes are its own, the expiry at most its own.
    let mut narrowed = caller(Role::Owner, read);
    narrowed.key_scopes = Some(read);
    narrowed.key_expires_at = Some(1_000);
    assert_eq!(
        bound_new_key(&narrowed, None, None),
        Ok((Some(read), Some(1_000)))
    );
    assert_eq!(
        bound_new_key(&narrowed, None, Some(2_000)),
        Ok((Some(read), Some(1_000)))
    );
    assert_eq!(
        bound_new_key(&narrowed, Some(Permissions::NONE), Some(500)),
        Ok((Some(Permissions::NONE), Some(500)))
    );
    assert!(bound_new_key(&narrowed, Some(Permissions::all()), None).is_err());
    // A member's key holds their grants: asking for more is refused.
    let member = caller(Role::Member, read);
    assert!(bound_new_key(&member, Some(Permissions::all()), None).is_err());
}

#[test]
fn grants_never_exceed_the_granter() {
    let owner = caller(Role::Owner, Permissions::all());
    assert_eq!(check_grant(&owner, Some(Role::Admin), None), Ok(()));
    assert_eq!(
        check_grant(&owner, None, Some(Permissions::grantable())),
        Ok(())
    );
    // An owner key narrowed to administration makes no admin and grants nothing else.
    let narrowed = caller(
        Role::Owner,
        [Permission::OrganizationAdmin, Permission::ServiceRead]
            .into_iter()
            .collect(),
    );
    assert!(check_grant(&narrowed, Some(Role::Owner), None).is_err());
    assert!(check_grant(&narrowed, Some(Role::Admin), None).is_err());
    assert_eq!(check_grant(&narrowed, Some(Role::Member), None), Ok(()));
    assert_eq!(
        check_grant(&narrowed, None, Some(Permissions::member_default())),
        Ok(())
    );
    let delete = [Permission::ServiceDelete].into_iter().collect();
    assert!(check_grant(&narrowed, None, Some(delete)).is_err());
}

#[test]
fn servers_are_registered_by_the_operator_unless_every_organization_may() {
    let admin = caller(Role::Admin, Permissions::all());
    let member = caller(Role::Member, Permissions::NONE);
    let operator = Some("o");
    let other = Some("another");
    assert_eq!(
        check_register_server(&admin, ServerRegistration::Operator, operator),
        Ok(())
    );
    assert!(matches!(
        check_register_server(&admin, ServerRegistration::Operator, other),
        Err(Denied::Rule(_))
    ));
    assert!(check_register_server(&admin, ServerRegistration::Operator, None).is_err());
    assert_eq!(
        check_register_server(&admin, ServerRegistration::Admins, other),
        Ok(())
    );
    assert!(matches!(
        check_register_server(&member, ServerRegistration::Admins, operator),
        Err(Denied::Missing(Permission::OrganizationAdmin))
    ));
    assert_eq!(
        ServerRegistration::parse("admins"),
        Some(ServerRegistration::Admins)
    );
    assert_eq!(ServerRegistration::parse("everyone"), None);
}
