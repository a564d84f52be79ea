// VM export through the console in Chromium: the Export dialog downloads the VM (a real browser download), and
// the file is the toolstack's own export with the same ETag, byte for byte; a download cut mid-way resumes with
// Range + If-Range (206) into the same bytes. The VM is imported through the toolstack's /import.
import { readFile } from "node:fs/promises";
import { toolstackPort } from "../playwright.config.ts";
import { collect, http, testXva } from "../server/toolstack/transfer/testing.ts";
import { cutDownload, dataDisk } from "../server/transfers/download/testing.ts";
import { XenApiClient } from "../server/xenapi/client.ts";
import { E2E_PASSWORD, expect, test } from "./fixtures.ts";

const toolstackUrl = `http://127.0.0.1:${toolstackPort}`;

async function importVm(session: string, name: string): Promise<void> {
  const archive = await collect(testXva({ name, disks: [dataDisk(24)] }));
  const answer = await http(`${toolstackUrl}/import?session_id=${session}`, { method: "PUT", body: archive, headers: { "content-length": String(archive.length) } });
  expect(answer.status).toBe(200);
}

/** The toolstack's own export that `etag` names (offset 0: the same bytes as the download). */
async function direct(session: string, uuid: string, etag: string, compression: string): Promise<Buffer> {
  const answer = await http(`${toolstackUrl}/export?session_id=${session}&uuid=${uuid}&use_compression=${compression}&offset=0&etag=${encodeURIComponent(etag)}`);
  expect(answer.status).toBe(200);
  return answer.body;
}

test("Export dialog: the browser downloads the toolstack's export; a broken download resumes with Range", async ({ page, baseURL, request }) => {
  // An import, two exports and their comparisons: on a busy 2-core machine this takes well over the default 30 s.
  test.setTimeout(120_000);
  const xapi = await XenApiClient.login(toolstackUrl, "root", E2E_PASSWORD, "hangar-e2e");
  const name = `e2e-export-${Date.now()}`;
  await importVm(xapi.session, name);

  await page.goto("/vms");
  await page.getByRole("searchbox", { name: "Filter VMs by name" }).fill(name);
  await page.getByRole("link", { name, exact: true }).click();
  await expect(page.getByRole("heading", { level: 1, name })).toBeVisible();
  const uuid = (await page.getByText(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/).first().textContent())!;

  await page.getByRole("button", { name: "Export" }).click();
  const dialog = page.getByRole("dialog", { name: `Export ${name}` });
  await expect(dialog.getByRole("radio", { name: /zstd/ })).toBeChecked();
  await dialog.getByRole("radio", { name: /gzip/ }).check();
  await page.screenshot({ path: test.info().outputPath("export-dialog.png") });
  const downloading = page.waitForEvent("download");
  await dialog.getByRole("button", { name: "Download" }).click();
  const download = await downloading;
  expect(download.suggestedFilename()).toBe(`${name}.xva`);
  const file = await readFile((await download.path())!);
  await expect(dialog.getByText(/Export complete/)).toBeVisible({ timeout: 30_000 });
  await expect(dialog.getByRole("progressbar", { name: `Export of ${name}` })).toHaveAttribute("aria-valuenow", "100");
  await page.screenshot({ path: test.info().outputPath("export-done.png") });

  // The same URL again: the same, complete export, with its length (and in a Range answer); the toolstack's
  // bytes for that ETag.
  const again = await page.request.get(download.url());
  expect(again.status()).toBe(200);
  expect(again.headers()["content-length"]).toBe(String(file.length));
  const etag = again.headers().etag!;
  expect(Buffer.from(await again.body()).equals(file)).toBe(true);
  const first = await page.request.get(download.url(), { headers: { range: "bytes=0-0", "if-range": etag } });
  expect(first.status()).toBe(206);
  expect(first.headers()["content-range"]).toBe(`bytes 0-0/${file.length}`);
  expect((await direct(xapi.session, uuid, etag, "gzip")).equals(file)).toBe(true);

  // A download cut after 300 kB, resumed with Range + If-Range as a browser does.
  const cookie = (await page.context().cookies()).map((c) => `${c.name}=${c.value}`).join("; ");
  const url = `${baseURL}/api/download/vm/${uuid}.xva?compression=zstd`;
  const cut = await cutDownload(url, { cookie }, 300_000);
  const cutEtag = String(cut.headers.etag);
  const rest = await page.request.get(url, { headers: { range: "bytes=300000-", "if-range": cutEtag } });
  expect(rest.status()).toBe(206);
  const whole = await direct(xapi.session, uuid, cutEtag, "zstd");
  expect(rest.headers()["content-range"]).toBe(`bytes 300000-${whole.length - 1}/${whole.length}`);
  expect(Buffer.concat([cut.body, Buffer.from(await rest.body())]).equals(whole)).toBe(true);

  // Without the console session: refused.
  const anonymous = await request.get(url, { failOnStatusCode: false });
  expect(anonymous.status()).toBe(401);
});
