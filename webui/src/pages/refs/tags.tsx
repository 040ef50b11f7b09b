// Tags: the list with the tagged commit, create from any ref, delete (confirmed).
import { useState } from "preact/hooks";
import { api, seg } from "../../api";
import { ErrorPage, Loading } from "../../components/error_page";
import { repoHref } from "../../components/layout";
import { PagedTable } from "../../components/paged_table";
import { Link } from "../../components/router";
import { useAsync } from "../../components/use_async";
import { type NamedRef, PAGE_SIZE, refOrDefault, repoPath } from "./model";
import { CreateRefForm, DeleteRefButton, HeadCommit } from "./ref_forms";

export function TagsPage({ repo }: { repo: string }) {
  const defaultBranch = useAsync((signal) => refOrDefault(repo, null, signal), [repo]);
  const [generation, setGeneration] = useState(0);
  if (defaultBranch.error) return <ErrorPage error={defaultBranch.error} />;
  if (!defaultBranch.data) return <Loading what="tags" />;
  const changed = () => setGeneration((n) => n + 1);
  const tags = `${repoPath(repo)}/tags`;
  return (
    <div class="refs-page" data-testid="tags-page">
      <CreateRefForm
        repo={repo}
        kind="tag"
        defaultSource={defaultBranch.data}
        create={async (name, source) => {
          await api.post(tags, { id: name, ref: source });
          changed();
        }}
      />
      <PagedTable<NamedRef>
        load={(after, signal) => api.page<NamedRef>(tags, {}, after, PAGE_SIZE, signal)}
        columns={[
          {
            title: "Tag",
            cell: (tag) => (
              <Link href={repoHref(repo, "objects", { ref: tag.id })}>
                <strong>{tag.id}</strong>
              </Link>
            ),
          },
          { title: "Commit", cell: (tag) => <HeadCommit repo={repo} commitId={tag.commit_id} /> },
          {
            title: "",
            className: "row-actions",
            cell: (tag) => (
              <DeleteRefButton kind="tag" name={tag.id} remove={() => api.del(`${tags}/${seg(tag.id)}`)} onDeleted={changed} />
            ),
          },
        ]}
        rowKey={(tag) => tag.id}
        resetKey={String(generation)}
        empty="No tags."
        testId="tags-table"
      />
    </div>
  );
}
