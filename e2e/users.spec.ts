// Users, roles and the audit trail in the console (Chromium), in order (the pages are shot last, with the users
// the tests before made): a pool administrator adds a read-only user, who
// then sees every page with every action disabled and saying why (on hover and focus); a refusal the
// toolstack makes anyway is shown in words; the Audit page lists what happened and says the chain verifies;
// the directory is configured (test connection, then on) against a throwaway slapd, and a directory user
// logs in with the role of their nested group; a cross-site request is refused.
import type { Page } from "@playwright/test";
import { startSlapd, SUFFIX } from "../server/toolstack/rbac/slapd-testing.ts";
import { toolstackPort } from "../playwright.config.ts";
import { E2E_PASSWORD, anonymousTest, expect, test } from "./fixtures.ts";

const TOOLSTACK = `http://127.0.0.1:${toolstackPort}/jsonrpc`;

async function rpc(method: string, params: unknown[]): Promise<unknown> {
  const response = await fetch(TOOLSTACK, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", method, params, id: 1 }) });
  const body = (await response.json()) as { result?: unknown; error?: { message: string; data: unknown } };
  if (body.error !== undefined) throw new Error(`${method}: ${body.error.message} ${JSON.stringify(body.error.data)}`);
  return body.result;
}

async function logInAs(page: Page, user: string, password: string): Promise<void> {
  await page.goto("/login");
  await page.getByLabel("User name").fill(user);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Log in" }).click();
  await expect(page.getByRole("heading", { level: 1, name: "Dashboard" })).toBeVisible();
}

/** A control that does nothing for this role: still there, focusable, saying why when focused. */
async function expectDenied(page: Page, name: string | RegExp, why: RegExp): Promise<void> {
  const control = page.getByRole("button", { name }).first();
  await expect(control).toHaveAttribute("aria-disabled", "true");
  await control.focus();
  await expect(page.getByRole("tooltip").filter({ hasText: why }).first()).toBeVisible();
  await expect(control).toHaveAccessibleDescription(why);
}

async function addLocalUser(page: Page, name: string, password: string, role: string): Promise<void> {
  await page.goto("/users");
  const form = page.getByRole("form", { name: "Add a local user" });
  await form.getByLabel("User name").fill(name);
  await form.getByLabel("Password").fill(password);
  await form.getByLabel("Role").selectOption(role);
  await form.getByRole("button", { name: "Add a local user" }).click();
  await expect(form.getByRole("status")).toHaveText(`${name} may now log in as ${role}.`);
}

test("a read-only user sees every page with each action disabled, saying why; the toolstack's own refusal comes in words", async ({ page }) => {
  const name = `auditor-${Date.now()}`;
  await addLocalUser(page, name, "auditor-password", "read-only");
  await expect(page.getByRole("row", { name: new RegExp(name) }).getByLabel(`Role of ${name}`)).toHaveValue("read-only");
  const root = String(await rpc("session.login_with_password", ["root", E2E_PASSWORD]));
  const rootsTask = String(await rpc("task.create", [root, `root's import ${Date.now()}`, "a task of root's"]));
  // Something on each page to act on: a VM, and a volume on the default SR.
  const vmName = `seen-not-touched-${Date.now()}`;
  const vm = String(await rpc("VM.create", [root, { name_label: vmName }]));
  const [pool] = (await rpc("pool.get_all", [root])) as string[];
  const sr = String(await rpc("pool.get_default_SR", [root, pool]));
  const volumeName = `seen-volume-${Date.now()}`;
  await rpc("VDI.create", [root, { SR: sr, name_label: volumeName, virtual_size: 1048576 }]);

  await page.getByRole("button", { name: "Log out" }).click();
  await logInAs(page, name, "auditor-password");
  await expect(page.getByText("Role: read-only")).toBeVisible();
  await expect(page.getByRole("heading", { level: 1, name: "Dashboard" })).toBeVisible();

  await page.goto("/hosts");
  await expect(page.getByRole("heading", { level: 1, name: "Hosts" })).toBeVisible();
  await page.goto("/plugins");
  await expectDenied(page, /^Run conformance checks on /, /^Needs the pool-admin role; you are read-only\.$/);
  await page.goto("/storage");
  await expectDenied(page, "Create SR", /^Needs the pool-operator role or higher; you are read-only\.$/);
  await page.goto(`/storage/${String(await rpc("SR.get_uuid", [root, sr]))}`);
  await expectDenied(page, "Create volume", /^Needs the vm-admin role or higher; you are read-only\.$/);
  await page.getByRole("button", { name: `Actions for ${volumeName}`, exact: true }).click();
  const menu = page.getByRole("menu", { name: `Actions for ${volumeName}`, exact: true });
  await expect(menu.getByRole("menuitem", { name: /^Destroy…/ })).toHaveAttribute("aria-disabled", "true");
  await expect(menu.getByRole("menuitem", { name: /^Destroy…/ })).toHaveAccessibleDescription(/Needs the vm-admin role or higher/);
  await expect(menu.getByRole("menuitem", { name: /^Details…/ })).not.toHaveAttribute("aria-disabled");
  await page.keyboard.press("Escape");
  await page.goto("/vms");
  await expectDenied(page, "Choose files to import", /Needs the vm-admin role or higher/);
  await expectDenied(page, "Import from URL", /Needs the vm-admin role or higher/);
  await page.goto(`/vms/${encodeURIComponent(vm)}`);
  await expect(page.getByRole("heading", { level: 1, name: vmName })).toBeVisible();
  for (const action of ["Rename", "Edit description", "Export", "Destroy"]) await expectDenied(page, action, /Needs the vm-admin role or higher/);
  await page.goto("/tasks");
  await expectDenied(page, "Copy or mirror a volume", /Needs the vm-admin role or higher/);
  await page.goto("/users");
  await expectDenied(page, "Add a local user", /^Needs the pool-admin role; you are read-only\.$/);
  await expect(page.getByLabel(`Role of ${name}`)).toHaveAttribute("aria-disabled", "true");
  await page.goto("/audit");
  await expect(page.getByText("The audit trail verifies")).toBeVisible();
  await expect(page.getByRole("row").filter({ hasText: "subject.hangar_create_local" }).first()).toBeVisible();

  // A task of someone else's: the page offers Cancel (a user may cancel their own), the toolstack refuses.
  await page.goto("/tasks");
  const running = page.getByRole("button", { name: new RegExp(`^Cancel root's import`) });
  await running.click();
  await expect(page.getByText(/Your role does not allow this \(task\.destroy\/any\)\. Roles that may: pool-admin, pool-operator\./)).toBeVisible();
  await rpc("task.cancel", [root, rootsTask]);
  await page.screenshot({ path: test.info().outputPath("read-only-tasks.png"), fullPage: true });
});

test("a VM operator can copy nothing, but cancels their own task", async ({ page }) => {
  const name = `operator-${Date.now()}`;
  await addLocalUser(page, name, "operator-password", "vm-operator");
  const own = String(await rpc("session.login_with_password", [name, "operator-password"]));
  const label = `${name}'s own work`;
  await rpc("task.create", [own, label, "a task of the operator's"]);
  await page.getByRole("button", { name: "Log out" }).click();
  await logInAs(page, name, "operator-password");
  await page.goto("/tasks");
  await expectDenied(page, "Copy or mirror a volume", /^Needs the vm-admin role or higher; you are vm-operator\.$/);
  await page.getByRole("button", { name: `Cancel ${label}` }).click();
  await expect(page.getByRole("button", { name: `Cancel ${label}` })).toHaveCount(0);
  await expect(page.getByText(/Your role does not allow this/)).toHaveCount(0);
});

test("the directory: tested, turned on, a group given a role; its nested members log in with it; turned off again", async ({ page }) => {
  const slapd = await startSlapd();
  try {
    const people = `ou=people,${SUFFIX}`;
    const groups = `ou=groups,${SUFFIX}`;
    await slapd.add(
      [
        `dn: ${people}\nobjectClass: organizationalUnit\nou: people\n`,
        `dn: ${groups}\nobjectClass: organizationalUnit\nou: groups\n`,
        `dn: uid=svc,${people}\nobjectClass: inetOrgPerson\nuid: svc\ncn: svc\nsn: svc\nuserPassword: svc-secret\n`,
        `dn: uid=dora,${people}\nobjectClass: inetOrgPerson\nuid: dora\ncn: Dora\nsn: Dora\nuserPassword: dora-password\n`,
        `dn: cn=oncall,${groups}\nobjectClass: groupOfNames\ncn: oncall\nmember: uid=dora,${people}\n`,
        `dn: cn=ops,${groups}\nobjectClass: groupOfNames\ncn: ops\nmember: cn=oncall,${groups}\n`,
      ].join("\n"),
    );
    await page.goto("/users");
    const settings = page.getByRole("form", { name: "Directory settings" });
    await settings.getByLabel("Name", { exact: true }).fill("hangar.test");
    await settings.getByLabel("Server URL").fill(slapd.url);
    await settings.getByLabel("Service account DN").fill(`uid=svc,${people}`);
    await settings.getByLabel("Service account password").fill("wrong");
    await settings.getByLabel("Users base DN").fill(people);
    await settings.getByLabel("Groups base DN").fill(groups);
    await settings.getByLabel("CA certificate (PEM)").fill(slapd.cert);
    await settings.getByRole("button", { name: "Test connection" }).click();
    await expect(settings.getByText(/refused the service account/)).toBeVisible();
    await settings.getByLabel("Service account password").fill("svc-secret");
    await settings.getByRole("button", { name: "Test connection" }).click();
    await expect(settings.getByRole("status")).toHaveText(/^Connected to ldap:\/\/127\.0\.0\.1:\d+ \(StartTLS\) as uid=svc,.*: 2 users under ou=people,.*, 2 groups under ou=groups/);
    await settings.getByRole("button", { name: "Save and turn on" }).click();
    await expect(page.getByRole("button", { name: "Turn the directory off" })).toBeVisible();

    const add = page.getByRole("form", { name: "Add a directory user or group" });
    await add.getByLabel("DN").fill(`cn=ops,${groups}`);
    await add.getByLabel("Role").selectOption("vm-admin");
    await add.getByRole("button", { name: "Add a directory user or group" }).click();
    await expect(page.getByRole("row", { name: /ops/ }).getByText("Directory group")).toBeVisible();

    await page.getByRole("button", { name: "Log out" }).click();
    await logInAs(page, "dora", "dora-password");
    await expect(page.getByText("Role: vm-admin")).toBeVisible();
    await page.goto("/vms");
    await expect(page.getByRole("button", { name: "Choose files to import" })).not.toHaveAttribute("aria-disabled");
    await page.getByRole("button", { name: "Log out" }).click();

    // root turns it off: the directory's users are out.
    await logInAs(page, "root", E2E_PASSWORD);
    await page.goto("/users");
    await page.getByRole("button", { name: "Turn the directory off" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Turn off" }).click();
    await expect(page.getByRole("form", { name: "Directory settings" })).toBeVisible();
  } finally {
    await slapd.stop();
  }
});

test("the Users and Audit pages at 1280 and 360 px, light and dark; the audit filters narrow the rows", async ({ page }) => {
  await addLocalUser(page, `operator-${Date.now()}`, "operator-password", "vm-operator");
  for (const scheme of ["light", "dark"] as const) {
    await page.emulateMedia({ colorScheme: scheme });
    for (const width of [1280, 360]) {
      await page.setViewportSize({ width, height: 900 });
      await page.goto("/users");
      await expect(page.getByRole("heading", { level: 1, name: "Users" })).toBeVisible();
      await page.screenshot({ path: test.info().outputPath(`users-${width}-${scheme}.png`), fullPage: true });
      await page.goto("/audit");
      await expect(page.getByText("The audit trail verifies")).toBeVisible();
      await page.screenshot({ path: test.info().outputPath(`audit-${width}-${scheme}.png`), fullPage: true });
    }
  }
  await page.setViewportSize({ width: 1280, height: 900 });
  await page.getByLabel("Action").fill("subject.hangar_create_local");
  const rows = page.getByRole("row").filter({ has: page.getByRole("cell") });
  await expect(rows.filter({ hasNotText: "subject.hangar_create_local" })).toHaveCount(0);
  await expect(rows.filter({ hasText: "subject.hangar_create_local" }).first()).toBeVisible();
  await page.getByLabel("Outcome").selectOption("DENIED");
  await expect(page.getByText(/^\d+ shown\.$/)).toBeVisible();
});

anonymousTest("a state-changing request from another site is refused before it runs", async ({ request }) => {
  const response = await request.post("/api/trpc/users.createLocal", { headers: { origin: "http://evil.example", "content-type": "application/json" }, data: { name: "x", password: "yyyyyyyy", role: "pool-admin" } });
  expect(response.status()).toBe(403);
  expect(await response.text()).toContain("may not change anything here");
});
