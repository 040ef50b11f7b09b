// A repository's settings: branch protection and garbage-collection rules. Each saves on its
// own; a user without the right gets the API's refusal next to the form.
import { GcSettings } from "./settings_gc";
import { ProtectionSettings } from "./settings_protection";

export function SettingsPage({ repo }: { repo: string }) {
  return (
    <section class="settings" data-testid="settings-page">
      <h2>Settings</h2>
      <ProtectionSettings repo={repo} />
      <GcSettings repo={repo} />
    </section>
  );
}
